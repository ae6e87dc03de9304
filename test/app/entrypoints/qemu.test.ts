/** The qemu node entrypoint: the bootstrapper with qemu fixed (cases in entrypoint-cases.ts). */
import { main } from '../../../src/app/entrypoints/qemu.js';
import { describeEntrypoint } from './entrypoint-cases.js';

describeEntrypoint('qemu', 'gcp', main);
