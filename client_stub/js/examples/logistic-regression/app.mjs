// The example page's program: a browser tab as a federated-learning client of fedagg.
//
// 1. A client id: ?client=ID, else a random one.
// 2. A task from the server: an aggregation whose one field is a dense float32 vector of
//    D + 1 = 9 values (the weights and the bias), a weighted federated mean (?aggregation=ID
//    picks one). The global model is the task's first broadcast tensor (zeros without one).
// 3. Local training: logistic regression by gradient descent on this client's slice of a
//    data set generated here from a fixed seed (two Gaussian blobs in D dimensions); the
//    slice is chosen from the client id, so different clients hold different examples.
// 4. The trained model is contributed, weighted by the number of local examples.
// 5. The aggregation's status is polled; once FINALIZED, the aggregated model's accuracy
//    on a fixed held-out test set is shown in #result.
//
// For tests: window.fedaggExample = {state, clientId, aggregationId, update (the
// Float32Array sent), weight, ack, progress, accuracy (of the aggregated model), error}.
import {FedaggClient, crc32c, decodeTensor, leafFields} from '/fedagg.mjs';

const D = 8;                 // features
const N_TRAIN = 4000;        // the pool the clients' slices are cut from
const N_TEST = 1000;         // held out, the same for every client
const DATA_SEED = 20261202;
const EPOCHS = 200;
const LEARNING_RATE = 0.5;
const POLL_MS = 500;

const params = new URLSearchParams(location.search);
const example = window.fedaggExample = {
  state: 'starting', clientId: null, aggregationId: null, update: null, weight: null, ack: null,
  progress: null, contributions: null, localAccuracy: null, accuracy: null, error: null,
};

const $ = (id) => document.getElementById(id);
function setState(state) {
  example.state = state;
  $('state').textContent = state;
}

// --- the data set ------------------------------------------------------------------------

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function gaussian(random) {
  let u = 0;
  while (u === 0) u = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

// n points: label 0 around -mu, label 1 around +mu, unit variance in every dimension.
function blobs(n, seed) {
  const random = mulberry32(seed);
  const mu = Array.from({length: D}, (_, j) => (j % 2 ? -0.52 : 0.52));
  const x = new Float64Array(n * D);
  const y = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    y[i] = random() < 0.5 ? 0 : 1;
    for (let j = 0; j < D; j++) x[i * D + j] = (y[i] ? mu[j] : -mu[j]) + gaussian(random);
  }
  return {x, y, n};
}

// This client's slice of the pool: 200 to 800 consecutive examples (wrapping around) from a
// place both chosen from the client id's CRC-32C.
function sliceFor(clientId, pool) {
  const h = crc32c(clientId);
  const start = h % pool.n;
  const count = 200 + ((h >>> 12) % 601);
  const x = new Float64Array(count * D);
  const y = new Uint8Array(count);
  for (let k = 0; k < count; k++) {
    const i = (start + k) % pool.n;
    x.set(pool.x.subarray(i * D, (i + 1) * D), k * D);
    y[k] = pool.y[i];
  }
  return {x, y, n: count};
}

// --- the model: weights w[0..D-1], bias w[D] ---------------------------------------------

function sigmoid(z) {
  return 1 / (1 + Math.exp(-z));
}

function train(initial, data) {
  const w = Float64Array.from(initial);
  const grad = new Float64Array(D + 1);
  for (let epoch = 0; epoch < EPOCHS; epoch++) {
    grad.fill(0);
    for (let i = 0; i < data.n; i++) {
      let z = w[D];
      for (let j = 0; j < D; j++) z += w[j] * data.x[i * D + j];
      const err = sigmoid(z) - data.y[i];
      for (let j = 0; j < D; j++) grad[j] += err * data.x[i * D + j];
      grad[D] += err;
    }
    for (let j = 0; j <= D; j++) w[j] -= (LEARNING_RATE * grad[j]) / data.n;
  }
  return w;
}

function accuracy(w, data) {
  let right = 0;
  for (let i = 0; i < data.n; i++) {
    let z = w[D];
    for (let j = 0; j < D; j++) z += w[j] * data.x[i * D + j];
    if ((z >= 0 ? 1 : 0) === data.y[i]) right++;
  }
  return right / data.n;
}

// --- the round ------------------------------------------------------------------------------

function suitable(task) {
  try {
    const leaves = leafFields(task);
    return leaves.length === 1 && leaves[0].kind === 'dense' && leaves[0].dtype === 'float32' &&
           leaves[0].numElements === D + 1 && leaves[0].encoding === 'PLAIN' &&
           ['FEDERATED_WEIGHTED_MEAN', 'FEDERATED_MEAN'].includes(leaves[0].intrinsic);
  } catch {
    return false;
  }
}

function globalModel(task) {
  const tensor = task.broadcast?.[0];
  if (!tensor) return new Float64Array(D + 1);
  const {values} = decodeTensor(tensor);
  if (values.length !== D + 1 || !(values instanceof Float32Array || values instanceof Float64Array)) {
    throw new Error(`the task's broadcast tensor has ${values.length} ${values.constructor.name} values; ` +
                    `this model takes ${D + 1} floats`);
  }
  return Float64Array.from(values);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function findTask(client, clientId) {
  const wanted = params.get('aggregation');
  for (;;) {
    const tasks = await client.getTasks(clientId, 64);
    const task = tasks.find((t) => (wanted ? t.aggregationId === wanted : suitable(t)));
    if (task) {
      if (!suitable(task)) throw new Error(`aggregation '${task.aggregationId}' is not a ${D + 1}-float weighted mean`);
      return task;
    }
    setState('waiting for a task');
    await sleep(1000);
  }
}

async function main() {
  const clientId = params.get('client') || `web-${crypto.randomUUID()}`;
  example.clientId = clientId;
  $('client-id').textContent = clientId;
  const client = new FedaggClient('', {token: params.get('token') || undefined});

  setState('getting a task');
  const task = await findTask(client, clientId);
  const aggregationId = task.aggregationId;
  example.aggregationId = aggregationId;
  $('aggregation').textContent = aggregationId;

  setState('training');
  const test = blobs(N_TEST, DATA_SEED + 1);
  const local = sliceFor(clientId, blobs(N_TRAIN, DATA_SEED));
  const initial = globalModel(task);
  const trained = train(initial, local);
  const update = Float32Array.from(trained);
  example.update = update;
  example.weight = local.n;
  example.localAccuracy = accuracy(trained, test);
  $('examples').textContent = String(local.n);
  $('local-accuracy').textContent = `${example.localAccuracy.toFixed(3)} (this client's model on the test set)`;

  setState('uploading');
  const ack = await client.contribute(task, clientId, [update], {
    weight: local.n,
    onProgress: (p) => {
      example.progress = p;
      $('progress').value = p.total ? p.committed / p.total : 1;
      $('progress-text').textContent = `${p.committed} / ${p.total} bytes committed, ${p.sent} sent`;
    },
  });
  example.ack = ack;
  $('progress').value = 1;

  setState('waiting for the round');
  for (;;) {
    const status = await client.aggregationStatus(aggregationId);
    example.contributions = Number(status.contributions ?? 0);
    $('contributions').textContent = String(example.contributions);
    $('aggregation-state').textContent = status.state;
    if (status.state === 'FAILED' || status.state === 'CANCELLED') {
      throw new Error(`aggregation '${aggregationId}' ended ${status.state}: ${status.detail ?? ''}`);
    }
    if (status.state === 'FINALIZED') {
      try {
        const result = await client.result(aggregationId);
        const model = result.fields[0].values;
        example.result = Array.from(model);
        example.accuracy = accuracy(model, test);
        break;
      } catch (e) {
        // FAILED_PRECONDITION: FINALIZED where this page asks, not yet where the result is.
        if (e.code !== 'FAILED_PRECONDITION') throw e;
      }
    }
    await sleep(POLL_MS);
  }
  const shown = $('result');
  shown.textContent = `accuracy ${example.accuracy.toFixed(3)}`;
  shown.className = 'done';
  setState('done');
}

main().catch((e) => {
  console.error(e);
  example.error = String(e?.message ?? e);
  const shown = $('result');
  shown.textContent = `error: ${example.error}`;
  shown.className = 'error';
  setState('error');
});
