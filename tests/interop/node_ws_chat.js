// Members of a chat room, with Node's `ws` package, against bin/example_ws_chat (two worker
// loops: the members' connections land on both).
//
//   node tests/interop/node_ws_chat.js ws://127.0.0.1:PORT/chat [MEMBERS]
//
// Opens MEMBERS members of room "lobby" and one of room "other". Once every member has been
// told it joined, each lobby member sends one line: every lobby member must get every line,
// across the loops, and the other room none; then the other room's member hears its own line.
// Prints one line per failure; exit 0 and PASS when everything matched.
'use strict';
const WebSocket = require('ws');

const base = process.argv[2];
const members = Number(process.argv[3] || 4);
const failures = [];
const deadline = setTimeout(() => { failures.push('timed out'); finish(); }, 20000);

function finish() {
  clearTimeout(deadline);
  for (const f of failures) console.log('FAIL ' + f);
  if (failures.length === 0) console.log('PASS ' + members + ' members across the loops');
  process.exit(failures.length === 0 ? 0 : 1);
}

function join(room) {
  const ws = new WebSocket(base + '/' + room);
  ws.heard = [];
  ws.joined = new Promise((resolve, reject) => {
    ws.on('message', (data) => {
      const text = String(data);
      if (text === 'joined ' + room) resolve(); else ws.heard.push(text);
    });
    ws.on('error', reject);
  });
  return ws;
}

async function main() {
  const lobby = Array.from({length: members}, () => join('lobby'));
  const other = join('other');
  await Promise.all([...lobby.map((ws) => ws.joined), other.joined]);
  lobby.forEach((ws, i) => ws.send('line ' + i));
  const expected = Array.from({length: members}, (_, i) => 'line ' + i).sort();
  const until = (ws, count) => new Promise((resolve) => {
    const check = () => (ws.heard.length >= count ? resolve() : setTimeout(check, 5));
    check();
  });
  await Promise.all(lobby.map((ws) => until(ws, members)));
  lobby.forEach((ws, i) => {
    const got = [...ws.heard].sort();
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      failures.push('member ' + i + ' heard ' + JSON.stringify(ws.heard));
    }
  });
  other.send('only here');
  await until(other, 1);
  if (JSON.stringify(other.heard) !== JSON.stringify(['only here'])) {
    failures.push('the other room heard ' + JSON.stringify(other.heard));
  }
  for (const ws of [...lobby, other]) ws.close(1000);
  finish();
}

main().catch((e) => { failures.push(String(e)); finish(); });
