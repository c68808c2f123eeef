// The browser upload benchmark's page program: one float32 update of `mib` MiB, uploaded
// `runs` times in chunks of `chunk_kib` KiB and `runs` times in one request (alternating, each
// as a new client id), each upload timed from the first request to the ack; every timing is
// POSTed as one JSON object to /collect, then {"done": true}.
import {FedaggClient, crc32c, encodeUpdate} from '/fedagg.mjs';

const params = new URLSearchParams(location.search);
const aggregation = params.get('aggregation') ?? 'bench-browser';
const runs = Number(params.get('runs') ?? 5);
const mib = Number(params.get('mib') ?? 16);
const chunkBytes = Number(params.get('chunk_kib') ?? 1024) * 1024;

const log = (line) => { document.getElementById('log').textContent += `\n${line}`; };
const report = (record) => fetch('/collect', {method: 'POST', body: JSON.stringify(record),
                                              headers: {'Content-Type': 'application/json'}});

async function main() {
  const client = new FedaggClient('');
  const spec = (await client.aggregationStatus(aggregation)).spec;
  const n = (mib * 1048576) / 4;
  const w = new Float32Array(n);
  for (let i = 0; i < n; i++) w[i] = (i % 1009) * 0.25 - 126;
  let t0 = performance.now();
  const update = encodeUpdate(spec, [w]);
  const encodeSeconds = (performance.now() - t0) / 1000;
  t0 = performance.now();
  crc32c(update.bytes);
  const crcSeconds = (performance.now() - t0) / 1000;
  await report({kind: 'setup', bytes: update.bytes.length, encodeSeconds, crcSeconds, userAgent: navigator.userAgent});
  const modes = [
    {mode: 'chunked', label: `${chunkBytes / 1024} KiB chunks`, chunk: chunkBytes},
    {mode: 'whole', label: `one ${mib} MiB request`, chunk: update.bytes.length},
  ];
  for (let run = 1; run <= runs; run++) {
    for (const {mode, label, chunk} of modes) {
      let requests = 0;
      let sent = 0;
      const start = performance.now();
      const ack = await client.upload(aggregation, `browser-${mode}-${run}`, update, {
        chunkBytes: chunk, onProgress: (p) => { requests++; sent = p.sent; }});
      const seconds = (performance.now() - start) / 1000;
      log(`${label} #${run}: ${seconds.toFixed(3)} s (${ack.contributions} counted)`);
      await report({kind: 'upload', mode, label, run, seconds, bytes: update.bytes.length, sent, writes: requests - 1});
    }
  }
  await report({done: true});
  log('done');
}

main().catch(async (e) => {
  log(`error: ${e.message}`);
  await report({error: String(e?.message ?? e), done: true});
});
