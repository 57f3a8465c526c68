'use strict';
// Node.js peer, one-shot: fs.readFile loads the whole file on the threadpool
// (Node 20 reads it in 512 KiB slices, each one threadpool job), then sends it.
// Usage: node readfile.js --port 0 --root DIR
const fs = require('fs');
const { start, fail } = require('./common');

start((full, req, res) => {
  fs.readFile(full, (err, data) => {
    if (err) return fail(res, err.code === 'ENOENT' || err.code === 'EISDIR' ? 404 : 500);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': data.length });
    res.end(req.method === 'HEAD' ? undefined : data);
  });
});
