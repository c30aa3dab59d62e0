// Interoperability client: Node's `ws` package (the WebSocket library most Node servers and
// clients use) against a UCP WebSocket echo server.
//
//   node tests/interop/node_ws_client.js ws://127.0.0.1:PORT/ws/echo [deflate]
//
// Sends text (ASCII, multi-byte UTF-8) and binary messages of sizes across the three length
// forms, a fragmented message, pings (the pongs must come back with their payloads), then
// closes with 1000 and a reason and expects the same code back and the connection to end.
// With `deflate`, permessage-deflate is offered and must be agreed. Prints one line per
// failure; exit 0 when everything matched.
'use strict';
const WebSocket = require('ws');

const url = process.argv[2];
const deflate = process.argv[3] === 'deflate';
const ws = new WebSocket(url, {perMessageDeflate: deflate ? {threshold: 16} : false});
const failures = [];
const fail = (what) => failures.push(what);
const deadline = setTimeout(() => { fail('timed out'); finish(2); }, 20000);

function finish(code) {
  clearTimeout(deadline);
  for (const f of failures) console.log('FAIL ' + f);
  if (failures.length === 0 && code === 0) console.log('PASS node ws ' + require('ws/package.json').version);
  process.exit(failures.length === 0 ? code : 1);
}

const pattern = (n) => Buffer.from(Array.from({length: n}, (_, i) => (i * 31 + 7) & 0xff));
const cases = [
  {data: 'hello', binary: false},
  {data: 'h\u00e9llo w\u00f6rld \u{1F600}', binary: false},
  {data: 'x'.repeat(125), binary: false},
  {data: 'y'.repeat(126), binary: false},
  {data: 'z'.repeat(70000), binary: false},
  {data: pattern(0), binary: true},
  {data: pattern(1), binary: true},
  {data: pattern(65535), binary: true},
  {data: pattern(65536), binary: true},
  {data: pattern(300000), binary: true},
];
let step = 0;
let pongs = 0;

function next() {
  if (step < cases.length) {
    const c = cases[step];
    ws.send(c.data, {binary: c.binary});
    return;
  }
  if (step === cases.length) {  // fragmented: three frames, one message
    ws.send('frag', {fin: false});
    ws.send('men', {fin: false});
    ws.send('ted', {fin: true});
    return;
  }
  ws.ping(Buffer.from('ping-payload'));
}

ws.on('open', () => {
  if (deflate && !/permessage-deflate/.test(ws.extensions)) fail('permessage-deflate not agreed');
  next();
});
ws.on('message', (data, isBinary) => {
  if (step < cases.length) {
    const c = cases[step];
    const expected = c.binary ? c.data : Buffer.from(c.data, 'utf8');
    if (isBinary !== c.binary) fail(`case ${step}: kind changed`);
    if (!Buffer.from(data).equals(expected)) fail(`case ${step}: echo differs (${data.length} bytes)`);
  } else if (step === cases.length) {
    if (isBinary || data.toString() !== 'fragmented') fail('fragmented message echoed wrong');
  } else {
    fail('unexpected message');
  }
  ++step;
  next();
});
ws.on('pong', (data) => {
  if (data.toString() !== 'ping-payload') fail('pong payload differs');
  if (++pongs === 1) ws.close(1000, 'done');
});
ws.on('close', (code, reason) => {
  if (code !== 1000) fail(`close code ${code}, expected 1000`);
  if (pongs !== 1) fail(`${pongs} pongs`);
  finish(0);
});
ws.on('error', (e) => { fail('error: ' + e.message); finish(1); });
