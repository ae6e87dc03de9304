/** The aws node entrypoint: the bootstrapper with aws fixed (cases in entrypoint-cases.ts). */
import { main } from '../../../src/app/entrypoints/aws.js';
import { describeEntrypoint } from './entrypoint-cases.js';

describeEntrypoint('aws', 'gcp', main);
