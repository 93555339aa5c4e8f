// memory.js OUT fedvm-device.js ARGS: runs the WebAssembly device in Node (node fedvm-device.js ARGS), then
// writes the size of its WebAssembly memory
// (which only grows: its peak) to the file OUT (the device closes its standard streams on exit)
const fs = require('fs');
const out = process.argv[2], js = require('path').resolve(process.argv[3]);
process.argv.splice(1, 3, js);
process.on('exit', () => fs.writeFileSync(out, String(require.cache[js].exports.asm.memory.buffer.byteLength) + '\n'));
require(js);
