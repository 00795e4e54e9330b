// Prints the three code point classes gen_unicode_tables.py needs, from the npm
// package @unicode/unicode-<version> (for a Unicode version newer than Debian's
// unicode-data), as lines "<class> <first hex> <last hex>" (last inclusive)
// after a first line "version <x.y.z>". Usage:
//   npm pack @unicode/unicode-15.1.0 && tar xzf unicode-unicode-15.1.0-*.tgz
//   node tools/unicode-ranges.mjs package > ranges.txt
//   python3 tools/gen_unicode_tables.py --ranges ranges.txt
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = resolve(process.argv[2] ?? 'package');
const version = JSON.parse(readFileSync(resolve(dir, 'package.json'), 'utf8')).name.replace(/^.*unicode-/, '');
const classes = {
  letters: ['General_Category/Letter'],   // Lu Ll Lt Lm Lo
  numbers: ['General_Category/Number'],   // Nd Nl No
  whitespace: ['Binary_Property/White_Space'],
};
const lines = [`version ${version}`];
for (const [name, paths] of Object.entries(classes)) {
  for (const path of paths) {
    const ranges = (await import(pathToFileURL(resolve(dir, path, 'ranges.mjs')).href)).default;
    for (const r of ranges) lines.push(`${name} ${r.begin.toString(16)} ${(r.end - 1).toString(16)}`);  // end is exclusive
  }
}
console.log(lines.join('\n'));
