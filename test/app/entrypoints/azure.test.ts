/** The azure node entrypoint: the bootstrapper with azure fixed (cases in entrypoint-cases.ts). */
import { main } from '../../../src/app/entrypoints/azure.js';
import { describeEntrypoint } from './entrypoint-cases.js';

describeEntrypoint('azure', 'aws', main);
