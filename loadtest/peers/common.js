'use strict';
// Shared plumbing for the two Node.js peers: argument parsing, safe path
// resolution under the root, POST /gzip, and the startup line the load
// test reads ("listening on http://127.0.0.1:PORT/", like unclog's).
const http = require('http');
const path = require('path');
const zlib = require('zlib');

function parseArgs(argv) {
  const opts = { port: 0, root: process.cwd() };
  for (let i = 2; i < argv.length; i += 2) {
    if (argv[i] === '--port') opts.port = Number(argv[i + 1]);
    else if (argv[i] === '--root') opts.root = path.resolve(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  return opts;
}

// Maps a URL path to a file under root, or null when it would escape it.
function resolve(root, url) {
  let p;
  try {
    p = decodeURIComponent(url.split('?')[0]);
  } catch (e) {
    return null;
  }
  const full = path.join(root, path.normalize(p));
  return full === root || full.startsWith(root + path.sep) ? full : null;
}

function fail(res, status) {
  res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': 0 });
  res.end();
}

// POST /gzip: the body, gzip-compressed on libuv's threadpool (zlib.gzip is async).
function gzip(req, res) {
  const parts = [];
  req.on('data', (d) => parts.push(d));
  req.on('end', () => {
    zlib.gzip(Buffer.concat(parts), (err, out) => {
      if (err) return fail(res, 500);
      res.writeHead(200, { 'Content-Type': 'application/gzip', 'Content-Length': out.length });
      res.end(out);
    });
  });
}

// Starts a server whose GET handler is serveFile(fullPath, req, res).
function start(serveFile) {
  const opts = parseArgs(process.argv);
  const server = http.createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/gzip') return gzip(req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(res, 405);
    const full = resolve(opts.root, req.url);
    if (full === null) return fail(res, 404);
    serveFile(full, req, res);
  });
  server.keepAliveTimeout = 60000;
  server.listen(opts.port, '127.0.0.1', () => {
    process.stderr.write(`listening on http://127.0.0.1:${server.address().port}/\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
  return server;
}

module.exports = { start, fail };
