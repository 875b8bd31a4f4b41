// A rota producer in Node.js (ioredis) for a namespace over K shards, written from
// docs/protocol.md ("A namespace over several shards") alone: it derives the shards'
// hash tags from the CRC16 runs of the slot space, routes each job by the CRC-32 of its
// id (of its name, for a name of "ordered": "Ordered names"), and enqueues it in its
// shard by plain commands ("(a) A transaction of plain commands").
//
//   node sharded.cjs '{"url": ..., "namespace": ..., "shards": K, "jobs": [{"id", "name", "args"}],
//                      "ordered": [names...]}'
//
// It prints one JSON line: {"tags": [...], "placed": [{"id", "shard"}...]}.
'use strict';

const Redis = require('ioredis');

const { plainJob } = require('./producer.cjs');

// CRC16 (XMODEM), as Redis Cluster hashes a key to one of 16384 slots.
function crc16(text) {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

// CRC-32 as zlib computes it.
function crc32(text) {
  let crc = 0xffffffff;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) {
      crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
    }
  }
  return (crc ^ 0xffffffff) >>> 0;
}

// The tag is the whole of what is hashed: a key {tag}:... hashes the tag.
const slot = (tag) => crc16(tag) % 16384;

function shardTags(ns, k) {
  if (k <= 1) return [ns];
  const width = 16384 / k;
  const run = (tag) => Math.floor(slot(tag) / width);
  const home = run(ns);
  const tags = [ns];
  let i = 1;
  for (let target = 0; target < k; target++) {
    if (target === home) continue;
    let tag = `${ns}~${i}`;
    for (let n = 1; run(tag) !== target; n++) tag = `${ns}~${i}.${n}`;
    tags.push(tag);
    i++;
  }
  return tags;
}

async function main() {
  const request = JSON.parse(process.argv[2]);
  const redis = new Redis(request.url, { maxRetriesPerRequest: 1, retryStrategy: () => null });
  const tags = shardTags(request.namespace, request.shards);
  const ordered = new Set(request.ordered || []);
  const placed = [];
  for (const job of request.jobs) {
    const shard = crc32(ordered.has(job.name) ? job.name : job.id) % request.shards;
    await plainJob(redis, `{${tags[shard]}}:`, job);
    placed.push({ id: job.id, shard });
  }
  redis.disconnect();
  process.stdout.write(JSON.stringify({ tags, placed }) + '\n');
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
