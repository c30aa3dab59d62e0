// node_ws_echo: the WebSocket echo server written with Node's `ws` package, as its users write
// it: every message goes back as it came (text or binary). No permessage-deflate (the
// benchmark compares framing and I/O, not zlib). Prints "listening on 127.0.0.1:PORT".
//
//   node bench/peers/node_ws_echo.js PORT        (0: any free port)
'use strict';
const WebSocket = require('ws');

const port = Number(process.argv[2] || 0);
const server = new WebSocket.Server({host: '127.0.0.1', port, perMessageDeflate: false,
                                     maxPayload: 64 * 1024 * 1024});
server.on('connection', (ws) => {
  ws.on('message', (data, isBinary) => ws.send(data, {binary: isBinary}));
  ws.on('error', () => {});
});
server.on('listening', () => console.log(`listening on 127.0.0.1:${server.address().port}`));
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const ws of server.clients) ws.terminate();
    server.close(() => process.exit(0));
  });
}
