// An S3-compatible server (s3rver) on a free loopback port, for the fetch tests.
//   node server.js --dir DIR --portfile FILE [--bucket NAME]...
// Credentials: access key S3RVER, secret S3RVER (s3rver's built-in account); requests are
// checked for a valid AWS SigV4 signature; ListObjectsV2 pages (max-keys, continuation-token). The port goes to --portfile once it listens. It
// exits on SIGTERM/SIGINT and when its parent dies, so a test never leaves it running.
'use strict';

const crypto = require('crypto');
const fs = require('fs');

// s3rver makes ListObjectsV2's continuation tokens with DES, which OpenSSL 3 leaves out
// (ERR_OSSL_EVP_UNSUPPORTED: every truncated listing fails with a 500 InternalError). The
// token is opaque to clients, so AES-128-CTR over the same 8-byte key and IV (zero-padded)
// serves as well: it is as reversible, and the IV still travels in the token.
for (const name of ['createCipheriv', 'createDecipheriv']) {
  const orig = crypto[name];
  crypto[name] = function (alg, key, iv, ...rest) {
    if (alg !== 'des') return orig.call(this, alg, key, iv, ...rest);
    const pad = (b) => Buffer.concat([b, Buffer.alloc(16 - b.length)]);
    return orig.call(this, 'aes-128-ctr', pad(key), pad(iv), ...rest);
  };
}

// s3rver escapes each text with he.escape and hands it to fast-xml-parser's XMLBuilder,
// which escapes it again: a key "a&b" is listed as "a&amp;amp;b", which S3 never sends.
// Its builder is made to leave entities alone, so each text is escaped once, as S3 does.
const fxpPath = require.resolve('fast-xml-parser', {
  paths: [require.resolve('@20minutes/s3rver')],
});
const fxp = require(fxpPath);
class OnceEscapingBuilder extends fxp.XMLBuilder {
  constructor(options) { super({ ...options, processEntities: false }); }
}
require.cache[fxpPath].exports = { ...fxp, XMLBuilder: OnceEscapingBuilder };

const S3rver = require('@20minutes/s3rver');

function parseArgs(argv) {
  const out = { buckets: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--dir') { out.dir = v; i++; }
    else if (a === '--portfile') { out.portfile = v; i++; }
    else if (a === '--bucket') { out.buckets.push({ name: v }); i++; }
    else if (a === '--verbose') { out.verbose = true; }
    else { console.error(`server.js: unknown argument ${a}`); process.exit(2); }
  }
  if (!out.dir || !out.portfile) {
    console.error('usage: node server.js --dir DIR --portfile FILE [--bucket NAME]...');
    process.exit(2);
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  fs.mkdirSync(args.dir, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory: args.dir,
    silent: !args.verbose,
    configureBuckets: args.buckets,
  });
  const addr = await server.run();
  fs.writeFileSync(args.portfile + '.tmp', `${addr.port}\n`);
  fs.renameSync(args.portfile + '.tmp', args.portfile);
  const stop = () => { server.close().finally(() => process.exit(0)); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 200).unref();
  // keep the event loop alive while the server runs
  setInterval(() => {}, 1 << 30);
}

main().catch((e) => { console.error(`server.js: ${e.stack || e}`); process.exit(1); });
