'use strict';
// Node.js peer, streaming: fs.createReadStream reads 64 KiB per threadpool
// job (its default highWaterMark) and pipes to the socket with backpressure.
// Usage: node stream.js --port 0 --root DIR
const fs = require('fs');
const { start, fail } = require('./common');

start((full, req, res) => {
  fs.stat(full, (err, st) => {
    if (err || !st.isFile()) return fail(res, 404);
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': st.size });
    if (req.method === 'HEAD') return res.end();
    const stream = fs.createReadStream(full);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  });
});
