/**
 * Entry point bundled by mini and run inside its network namespace (`ip netns exec`): the
 * production `confboot metadata-server` command, so it listens on the bridge where the VMs are.
 * Arguments as for `confboot metadata-server`. Importing this module runs it.
 */
import { run } from '../../../app/operator/metadata-server.js';

run(process.argv.slice(2)).then((code) => process.exit(code));
