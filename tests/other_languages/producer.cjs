// A rota producer in Node.js (ioredis), written from docs/protocol.md alone: it enqueues
// jobs, and jobs that wait for others, the three documented ways.
//
//   node producer.cjs '<JSON request>'
//
// The request names the Redis URL, the namespace prefix ({ns}:), a mode and the jobs
// ([{id, name, args, after}], `after` a list of parent ids). It prints one JSON line:
// {"replies": [...]}, one entry per job: {"reply": <the script's reply>} or
// {"error": "<error reply>"}, and for plain commands {"attempts": <EXEC attempts>}.
//
// Modes:
//   script  the enqueue script (its text in request.script, from the documented python
//           command), by EVALSHA with a fallback to EVAL (ioredis's defineCommand)
//   fcall   the function rota_<digest>_enqueue of rota's library (its text in
//           request.library): FUNCTION LOAD REPLACE, then FCALL
//   plain   plain commands: MULTI/EXEC for a job without parents ("(a) A transaction of
//           plain commands"), WATCH/MULTI/EXEC for a dependent job ("Enqueueing a
//           dependent job from another language"). request.race makes another client
//           touch the first parent between the read and EXEC, once, as a second producer
//           adding a child of its own would: EXEC answers nil and the producer starts again.
'use strict';

const fs = require('fs');
const Redis = require('ioredis');

function connect(url) {
  // Fail at once rather than retry for ever: the test reads the error.
  return new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: () => null });
}

// Enqueue one job with the enqueue script's ten arguments (docs: "(c) The enqueue script"),
// and for a job with a fair key (job.fair_key) the fourteen that reach ARGV[14].
function scriptArgs(prefix, job, now) {
  const args = [prefix, job.id, job.name, job.args, String(now), '0', '', '0', '', '',
    (job.after || []).join(' ')];
  if (job.fair_key) {
    args.push('', '', '', job.fair_key); // no trace context, no expiry, then the key
  }
  return args;
}

async function byScript(redis, request) {
  redis.defineCommand('rotaEnqueue', {
    numberOfKeys: 1,
    lua: fs.readFileSync(request.script, 'utf8'),
  });
  return (job) => redis.rotaEnqueue(...scriptArgs(request.prefix, job, Date.now()));
}

async function byFunction(redis, request) {
  const code = fs.readFileSync(request.library, 'utf8');
  const first = code.split('\n', 1)[0]; // #!lua name=rota_<digest>
  const match = /^#!lua name=(rota_[0-9a-f]{16})$/.exec(first);
  if (!match) {
    throw new Error(`unexpected first line of the library: ${first}`);
  }
  await redis.call('FUNCTION', 'LOAD', 'REPLACE', code);
  const fn = `${match[1]}_enqueue`;
  return (job) => redis.call('FCALL', fn, 1, ...scriptArgs(request.prefix, job, Date.now()));
}

// (a) A transaction of plain commands: a job with no parents.
async function plainJob(redis, prefix, job) {
  const now = String(Date.now());
  const reply = await redis.multi()
    .hset(`${prefix}job:${job.id}`, 'name', job.name, 'args', job.args, 'enqueued_at', now)
    .lpush(`${prefix}queue:${job.name}`, job.id)
    .sadd(`${prefix}names`, job.name)
    .sadd(`${prefix}ready`, job.name)
    .lpush(`${prefix}wake:${job.name}`, '1')
    .ltrim(`${prefix}wake:${job.name}`, 0, 9)
    .exec();
  return { reply, attempts: 1 };
}

// Enqueueing a dependent job from another language: WATCH the parents, read their
// states, then write the job in MULTI/EXEC; EXEC answers nil when a parent changed.
async function plainDependent(redis, request, job) {
  const prefix = request.prefix;
  const parents = job.after;
  let raced = !request.race;
  for (let attempt = 1; attempt <= 10; attempt++) {
    await redis.watch(...parents.map((p) => `${prefix}job:${p}`));
    const results = {}; // parent -> its result JSON, for the complete ones
    const pending = [];
    for (const p of parents) {
      // A record has a name; a queued one has no state (protocol v4).
      const [name, state] = await redis.hmget(`${prefix}job:${p}`, 'name', 'state');
      if (name === null) {
        await redis.unwatch();
        throw new Error(`parent ${p} of job ${job.id} does not exist`);
      }
      if (state === 'dead' || state === 'aborted') {
        // The doc says the child is then dead at once, but gives no commands for it.
        await redis.unwatch();
        throw new Error(`parent ${p} of job ${job.id} ended ${state}`);
      }
      if (state === 'complete') {
        const result = await redis.hget(`${prefix}job:${p}`, 'result');
        results[p] = result === null ? 'null' : result;
      } else {
        pending.push(p);
      }
    }
    if (!raced) {
      // Another producer adds a child to the first parent meanwhile.
      raced = true;
      const other = connect(request.url);
      await other.hset(`${prefix}job:${parents[0]}`, 'children', '1');
      other.disconnect();
    }
    const now = String(Date.now());
    const jk = `${prefix}job:${job.id}`;
    const copied = Object.entries(results).flatMap(([p, r]) => [`r:${p}`, r]);
    const tx = redis.multi();
    if (pending.length > 0) {
      tx.hset(jk, 'name', job.name, 'args', job.args, 'enqueued_at', now, 'state', 'waiting',
        'after', parents.join(' '), 'deps', '1', 'pending', String(pending.length), ...copied);
      tx.zadd(`${prefix}waiting`, now, job.id);
      for (const p of pending) {
        tx.sadd(`${prefix}children:${p}`, job.id);
        tx.hset(`${prefix}job:${p}`, 'children', '1');
      }
      tx.sadd(`${prefix}names`, job.name);
    } else {
      // Every parent complete: enqueue as in (a), with deps 1 and the r: fields.
      tx.hset(jk, 'name', job.name, 'args', job.args, 'enqueued_at', now, 'deps', '1',
        ...copied);
      tx.lpush(`${prefix}queue:${job.name}`, job.id);
      tx.sadd(`${prefix}names`, job.name);
      tx.sadd(`${prefix}ready`, job.name);
      tx.lpush(`${prefix}wake:${job.name}`, '1');
      tx.ltrim(`${prefix}wake:${job.name}`, 0, 9);
    }
    const reply = await tx.exec();
    if (reply !== null) {
      return { reply, attempts: attempt };
    }
  }
  throw new Error(`job ${job.id}: EXEC aborted 10 times in a row`);
}

async function main() {
  const request = JSON.parse(process.argv[2]);
  const redis = connect(request.url);
  try {
    let enqueue;
    if (request.mode === 'script') {
      enqueue = await byScript(redis, request);
    } else if (request.mode === 'fcall') {
      enqueue = await byFunction(redis, request);
    } else if (request.mode === 'plain') {
      enqueue = (job) => ((job.after || []).length === 0
        ? plainJob(redis, request.prefix, job)
        : plainDependent(redis, request, job));
    } else {
      throw new Error(`unknown mode ${request.mode}`);
    }
    const replies = [];
    for (const job of request.jobs) {
      try {
        const out = await enqueue(job);
        replies.push(request.mode === 'plain' ? out : { reply: out });
      } catch (error) {
        if (!(error instanceof Redis.ReplyError) && request.mode !== 'plain') {
          throw error;
        }
        replies.push({ error: error.message });
      }
    }
    process.stdout.write(JSON.stringify({ replies }) + '\n');
  } finally {
    redis.disconnect();
  }
}

if (require.main === module) {
  main().catch((error) => {
    process.stderr.write(`${error.stack || error}\n`);
    process.exit(1);
  });
}

// The plain-commands enqueue, for the sharded producer (sharded.cjs) as well.
module.exports = { plainJob };
