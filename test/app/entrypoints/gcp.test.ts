/** The gcp node entrypoint: the bootstrapper with gcp fixed (cases in entrypoint-cases.ts). */
import { main } from '../../../src/app/entrypoints/gcp.js';
import { describeEntrypoint } from './entrypoint-cases.js';

describeEntrypoint('gcp', 'azure', main);
