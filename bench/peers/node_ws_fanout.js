// node_ws_fanout: the chat-room fan-out written with Node's `ws` package as its users write it:
// a member of /chat/{room} is told "joined {room}", and every text a member sends goes to every
// member of the room (itself included), as bin/example_ws_chat does it with ucp::ws::PubSub.
// Broadcasting is the loop over the room's sockets the ws README shows. No permessage-deflate.
// Prints "listening on 127.0.0.1:PORT".
//
//   node bench/peers/node_ws_fanout.js PORT        (0: any free port)
'use strict';
const WebSocket = require('ws');

const port = Number(process.argv[2] || 0);
const server = new WebSocket.Server({host: '127.0.0.1', port, perMessageDeflate: false});
const rooms = new Map();
server.on('connection', (ws, request) => {
  const room = decodeURIComponent(request.url.replace(/^\/chat\//, ''));
  if (!rooms.has(room)) rooms.set(room, new Set());
  const members = rooms.get(room);
  members.add(ws);
  ws.send('joined ' + room);
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    for (const member of members) {
      if (member.readyState === WebSocket.OPEN) member.send(data, {binary: false});
    }
  });
  ws.on('close', () => members.delete(ws));
  ws.on('error', () => {});
});
server.on('listening', () => console.log(`listening on 127.0.0.1:${server.address().port}`));
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const ws of server.clients) ws.terminate();
    server.close(() => process.exit(0));
  });
}
