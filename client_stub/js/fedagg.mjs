// fedagg.mjs: fedagg's JavaScript client for web pages, one dependency-free ES module.
//
// It speaks fedagg-server's HTTP path (docs/PROTOCOL.md, "The HTTP path"): the tasks a
// client may contribute to, an update as a resumable upload (start, chunks written with
// their offset and CRC-32C, submit with the whole update's CRC-32C; a cut request resumes
// from the size the server committed), an aggregation's status, and its result. Bodies are
// protobuf's JSON mapping of the fedagg.v1 messages (lowerCamelCase names, 64-bit integers
// as strings, enums by name); an update's and a result's bytes are raw, little-endian.
//
//   import {FedaggClient} from '/fedagg.mjs';
//   const client = new FedaggClient('', {token});
//   const [task] = await client.getTasks(clientId);
//   const ack = await client.contribute(task, clientId, [new Float32Array(n)], {weight: 10});
//
// Plain values only: a field whose spec declares a value encoding (quantized, discretized)
// is refused here; the C++ and Python clients encode those.

// ---------------------------------------------------------------------------------------
// CRC-32C (Castagnoli), slicing-by-8.

const CRC_TABLE = (() => {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff] ^ (c >>> 8);
      t[k * 256 + n] = c;
    }
  }
  return t;
})();

function asBytes(data) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (typeof data === 'string') return new TextEncoder().encode(data);
  throw new TypeError('expected bytes (a Uint8Array, an ArrayBuffer, a typed array or a string)');
}

// The CRC-32C of `bytes` (a Uint8Array, ArrayBuffer, typed array or string: UTF-8),
// continuing from `crc` (the CRC of the bytes before them; 0 to start). An unsigned 32-bit
// number: crc32c('123456789') === 0xe3069283.
export function crc32c(bytes, crc = 0) {
  const b = asBytes(bytes);
  const t = CRC_TABLE;
  let c = ~crc >>> 0;
  let i = 0;
  const n = b.length;
  const end8 = n - (n % 8);
  while (i < end8) {
    const lo = c ^ (b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24));
    c = t[1792 + (lo & 0xff)] ^ t[1536 + ((lo >>> 8) & 0xff)] ^
        t[1280 + ((lo >>> 16) & 0xff)] ^ t[1024 + (lo >>> 24)] ^
        t[768 + b[i + 4]] ^ t[512 + b[i + 5]] ^ t[256 + b[i + 6]] ^ t[b[i + 7]];
    i += 8;
  }
  while (i < n) c = t[(c ^ b[i++]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

// ---------------------------------------------------------------------------------------
// Errors.

const HTTP_STATUS_CODES = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND',
  405: 'UNIMPLEMENTED', 409: 'ABORTED', 413: 'RESOURCE_EXHAUSTED', 429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED', 500: 'INTERNAL', 501: 'UNIMPLEMENTED', 502: 'UNAVAILABLE',
  503: 'UNAVAILABLE', 504: 'DEADLINE_EXCEEDED',
};

// gRPC code numbers, for an error whose code came as a number.
const GRPC_CODE_NAMES = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED',
  'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION',
  'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS',
  'UNAUTHENTICATED'];

function codeName(code) {
  if (typeof code === 'number') return GRPC_CODE_NAMES[code] ?? `CODE_${code}`;
  return code == null ? undefined : String(code);
}

// An error the server answered (code: the gRPC code's name, e.g. 'ABORTED'; httpStatus:
// the HTTP status; committedSize: the upload's committed size where the server gave one),
// or one this client found before sending anything (code INVALID_ARGUMENT, httpStatus 0).
export class FedaggError extends Error {
  constructor(code, message, {httpStatus = 0, committedSize, body} = {}) {
    super(`${code}: ${message}`);
    this.name = 'FedaggError';
    this.code = code;
    this.httpStatus = httpStatus;
    this.serverMessage = message;
    if (committedSize !== undefined && committedSize !== null && committedSize !== '') {
      this.committedSize = Number(committedSize);
    }
    this.body = body;
  }
}

function localError(message) {
  return new FedaggError('INVALID_ARGUMENT', message);
}

// ---------------------------------------------------------------------------------------
// Specs: leaf fields, dtypes, intrinsics.

const DTYPE_NAMES = ['DTYPE_UNSPECIFIED', 'DTYPE_FLOAT32', 'DTYPE_FLOAT64', 'DTYPE_INT32',
  'DTYPE_INT64', 'DTYPE_FLOAT16', 'DTYPE_BFLOAT16'];

const DTYPES = {
  float32: {size: 4, array: Float32Array},
  float64: {size: 8, array: Float64Array},
  int32: {size: 4, array: Int32Array},
  int64: {size: 8, array: BigInt64Array},
  // 16-bit floats travel as their bits: a Uint16Array (or a Float16Array where the browser has one).
  float16: {size: 2, array: Uint16Array},
  bfloat16: {size: 2, array: Uint16Array},
};

const INTRINSIC_NAMES = ['INTRINSIC_UNSPECIFIED', 'FEDERATED_SUM', 'FEDERATED_MEAN',
  'FEDERATED_WEIGHTED_MEAN', 'FEDERATED_MAX', 'FEDERATED_MIN', 'SPARSE_SUM', 'SPARSE_SUM_SPARSE',
  'SPARSE_MEAN', 'SPARSE_WEIGHTED_MEAN', 'ROW_SPARSE_SUM', 'ROW_SPARSE_MEAN'];

const SPARSE = new Set(['SPARSE_SUM', 'SPARSE_SUM_SPARSE', 'SPARSE_MEAN', 'SPARSE_WEIGHTED_MEAN']);
const ROW_SPARSE = new Set(['ROW_SPARSE_SUM', 'ROW_SPARSE_MEAN']);
const WEIGHTED = new Set(['FEDERATED_WEIGHTED_MEAN', 'SPARSE_WEIGHTED_MEAN']);
const ENCODING_KINDS = ['PLAIN', 'QUANTIZED', 'DISCRETIZED'];

// 'DTYPE_FLOAT32' (or 1) -> 'float32'.
export function dtypeName(dtype) {
  const name = typeof dtype === 'number' ? DTYPE_NAMES[dtype] : dtype;
  if (!name || name === 'DTYPE_UNSPECIFIED') throw localError(`unknown or unset dtype ${JSON.stringify(dtype)}`);
  const short = String(name).replace(/^DTYPE_/, '').toLowerCase();
  if (!DTYPES[short]) throw localError(`unknown dtype ${JSON.stringify(dtype)}`);
  return short;
}

function protoDtype(short) {
  return `DTYPE_${short.toUpperCase()}`;
}

function intrinsicName(intrinsic) {
  return typeof intrinsic === 'number' ? INTRINSIC_NAMES[intrinsic] : String(intrinsic ?? 'INTRINSIC_UNSPECIFIED');
}

function encodingKind(encoding) {
  if (!encoding || encoding.kind === undefined || encoding.kind === null) return 'PLAIN';
  return typeof encoding.kind === 'number' ? (ENCODING_KINDS[encoding.kind] ?? `KIND_${encoding.kind}`) : String(encoding.kind);
}

function product(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

function flattenLeaves(valueType, path, out) {
  if (!valueType) throw localError(`the spec's value type has no type at '${path || 'value'}'`);
  if (valueType.tensor) {
    out.push({path: path || 'value', dtype: dtypeName(valueType.tensor.dtype),
              shape: (valueType.tensor.shape ?? []).map(Number)});
  } else if (valueType.structType) {
    (valueType.structType.fields ?? []).forEach((field, i) => {
      const child = field.name ? (path ? `${path}.${field.name}` : field.name) : `${path}[${i}]`;
      flattenLeaves(field.type, child, out);
    });
  } else {
    throw localError(`the spec's value type at '${path || 'value'}' is neither a tensor nor a struct`);
  }
  return out;
}

// The leaf fields of an AggregationSpec (JSON), in the order an update lists them
// (depth-first): {path, dtype, shape, numElements, intrinsic, kind ('dense' | 'sparse' |
// 'row_sparse'), weighted, encoding (the kind: 'PLAIN', 'QUANTIZED', 'DISCRETIZED')}.
export function leafFields(spec) {
  const leaves = flattenLeaves(spec.valueType, '', []);
  const intrinsics = spec.intrinsics ?? [];
  if (intrinsics.length !== leaves.length) {
    throw localError(`the spec has ${leaves.length} leaf fields but ${intrinsics.length} intrinsics`);
  }
  return leaves.map((leaf, i) => {
    const intrinsic = intrinsicName(intrinsics[i].intrinsic);
    return {
      ...leaf,
      numElements: product(leaf.shape),
      intrinsic,
      kind: SPARSE.has(intrinsic) ? 'sparse' : ROW_SPARSE.has(intrinsic) ? 'row_sparse' : 'dense',
      weighted: WEIGHTED.has(intrinsic),
      encoding: encodingKind(intrinsics[i].encoding),
    };
  });
}

// A fedagg.v1 Tensor in JSON (as in a spec's `broadcast`) -> {dtype, shape, values}: the
// values a typed array of the dtype (16-bit floats as their bits, a Uint16Array).
export function decodeTensor(tensor) {
  const dtype = dtypeName(tensor.dtype);
  const shape = (tensor.shape ?? []).map(Number);
  const bytes = base64Bytes(tensor.data ?? '');
  const {size, array} = DTYPES[dtype];
  if (bytes.length !== product(shape) * size) {
    throw localError(`tensor of ${dtype}[${shape}] holds ${bytes.length} bytes, expected ${product(shape) * size}`);
  }
  return {dtype, shape, values: new array(bytes.buffer, bytes.byteOffset, bytes.length / size)};
}

function base64Bytes(text) {
  const standard = text.replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(standard);
  // A fresh, aligned buffer, so that any typed array may view it.
  const bytes = new Uint8Array(new ArrayBuffer(binary.length + ((8 - (binary.length % 8)) % 8)), 0, binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

// ---------------------------------------------------------------------------------------
// Encoding an update.

function describe(leaf) {
  return `field '${leaf.path}' (${leaf.dtype}[${leaf.shape.join(',')}], ${leaf.intrinsic.toLowerCase()})`;
}

function typeName(x) {
  if (x === null) return 'null';
  if (Array.isArray(x)) return 'an Array';
  return x?.constructor?.name ?? typeof x;
}

// `data` as a typed array of `dtype`, without a copy when it already is one. Exact
// widenings are taken (Float32Array for float64, Int32Array for int64, plain arrays of
// numbers or BigInts); anything that could lose a value is refused.
function valuesOf(leaf, dtype, data, what) {
  const {array} = DTYPES[dtype];
  if (data instanceof array) return data;
  if (typeof Float16Array !== 'undefined' && data instanceof Float16Array && dtype === 'float16') {
    return new Uint16Array(data.buffer, data.byteOffset, data.length);
  }
  if (dtype === 'float64' && (data instanceof Float32Array || data instanceof Int32Array)) return Float64Array.from(data);
  if (dtype === 'int64' && (data instanceof Int32Array || Array.isArray(data))) {
    const out = new BigInt64Array(data.length);
    for (let i = 0; i < data.length; i++) {
      const v = data[i];
      if (typeof v === 'bigint') out[i] = v;
      else if (Number.isSafeInteger(v)) out[i] = BigInt(v);
      else throw localError(`${describe(leaf)}: ${what}[${i}] = ${v} is not an integer int64 holds exactly`);
    }
    return out;
  }
  if (Array.isArray(data) && (dtype === 'float32' || dtype === 'float64')) {
    for (let i = 0; i < data.length; i++) {
      if (typeof data[i] !== 'number') throw localError(`${describe(leaf)}: ${what}[${i}] is not a number`);
    }
    return array.from(data);
  }
  if (Array.isArray(data) && dtype === 'int32') {
    for (let i = 0; i < data.length; i++) {
      const v = data[i];
      if (!Number.isInteger(v) || v < -2147483648 || v > 2147483647) {
        throw localError(`${describe(leaf)}: ${what}[${i}] = ${v} is not an int32`);
      }
    }
    return Int32Array.from(data);
  }
  const wanted = dtype === 'float16' || dtype === 'bfloat16' ? `${array.name} (the values' 16-bit patterns)` : array.name;
  throw localError(`${describe(leaf)}: ${what} is ${typeName(data)}; the field declares ${dtype}, give a ${wanted}`);
}

function indicesOf(leaf, indices, bound, what) {
  let out;
  if (indices instanceof BigInt64Array) {
    out = indices;
  } else if (Array.isArray(indices) || indices instanceof Int32Array || indices instanceof Uint32Array ||
             indices instanceof Float64Array) {
    out = new BigInt64Array(indices.length);
    for (let i = 0; i < indices.length; i++) {
      const v = indices[i];
      if (typeof v === 'bigint') out[i] = v;
      else if (Number.isSafeInteger(v)) out[i] = BigInt(v);
      else throw localError(`${describe(leaf)}: ${what}[${i}] = ${v} is not an integer`);
    }
  } else {
    throw localError(`${describe(leaf)}: ${what} is ${typeName(indices)}; give a BigInt64Array or an array of numbers`);
  }
  const max = BigInt(bound);
  for (let i = 0; i < out.length; i++) {
    if (out[i] < 0n || out[i] >= max) {
      throw localError(`${describe(leaf)}: ${what}[${i}] = ${out[i]} is outside [0, ${bound})`);
    }
  }
  return out;
}

function bytesOfArray(a) {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

// One update for `spec` (an AggregationSpec in JSON, as getTasks returns it), from
// `fields`: one entry per leaf field in leaf order (an array; or an object keyed by the
// fields' paths), each a typed array of the field's dtype for a dense field, or
// {indices, values} for a sparse or row-sparse one (indices: linear indices, or row ids,
// as a BigInt64Array or an array of numbers; values: nnz values, or nnz rows one after
// another). Returns {header (the UpdateHeader, JSON), bytes (Uint8Array: every field's
// indices section then values section, back to back), crc32c, fields (the leaves)}.
export function encodeUpdate(spec, fields, {weight, ackLevel} = {}) {
  if (!LITTLE_ENDIAN) throw localError('this client writes typed arrays as they lie in memory; it needs a little-endian host');
  const leaves = leafFields(spec);
  let given = fields;
  if (!Array.isArray(fields)) {
    if (fields === null || typeof fields !== 'object' || ArrayBuffer.isView(fields)) {
      throw localError('fields: give an array with one entry per leaf field (or an object keyed by their paths)');
    }
    const unknown = Object.keys(fields).filter((k) => !leaves.some((leaf) => leaf.path === k));
    if (unknown.length) throw localError(`fields: no leaf field is named ${unknown.map((k) => `'${k}'`).join(', ')}`);
    given = leaves.map((leaf) => fields[leaf.path]);
  }
  if (given.length !== leaves.length) {
    throw localError(`the aggregation has ${leaves.length} leaf fields (${leaves.map((l) => l.path).join(', ')}); ` +
                     `${given.length} were given`);
  }
  const sections = [];
  const layouts = [];
  let total = 0;
  leaves.forEach((leaf, i) => {
    if (leaf.encoding !== 'PLAIN') {
      throw localError(`${describe(leaf)} declares the value encoding ${leaf.encoding}; this client sends plain values ` +
                       'only: contribute to it with the C++ or Python client, which encode');
    }
    const data = given[i];
    if (data === undefined || data === null) throw localError(`${describe(leaf)}: no values given`);
    if (leaf.kind === 'dense') {
      if (!ArrayBuffer.isView(data) && !Array.isArray(data)) {
        throw localError(`${describe(leaf)} is dense: give its ${leaf.numElements} values as a typed array, not ${typeName(data)}`);
      }
      const values = valuesOf(leaf, leaf.dtype, data, 'values');
      if (values.length !== leaf.numElements) {
        throw localError(`${describe(leaf)} holds ${leaf.numElements} elements; ${values.length} were given`);
      }
      sections.push(bytesOfArray(values));
      layouts.push({nnz: '0', dtype: protoDtype(leaf.dtype)});
      total += values.byteLength;
    } else {
      if (ArrayBuffer.isView(data) || Array.isArray(data) || data.indices === undefined || data.values === undefined) {
        throw localError(`${describe(leaf)} is ${leaf.kind === 'sparse' ? 'sparse' : 'row-sparse'}: give {indices, values}`);
      }
      const rowSize = leaf.kind === 'row_sparse' ? (leaf.shape[0] ? leaf.numElements / leaf.shape[0] : 0) : 1;
      const bound = leaf.kind === 'row_sparse' ? leaf.shape[0] : leaf.numElements;
      const indices = indicesOf(leaf, data.indices, bound, leaf.kind === 'row_sparse' ? 'row ids' : 'indices');
      const values = valuesOf(leaf, leaf.dtype, data.values, 'values');
      if (values.length !== indices.length * rowSize) {
        throw localError(`${describe(leaf)}: ${indices.length} ${leaf.kind === 'row_sparse' ? 'rows' : 'indices'} take ` +
                         `${indices.length * rowSize} values; ${values.length} were given`);
      }
      sections.push(bytesOfArray(indices), bytesOfArray(values));
      layouts.push({nnz: String(indices.length), dtype: protoDtype(leaf.dtype)});
      total += indices.byteLength + values.byteLength;
    }
  });
  const weighted = leaves.some((leaf) => leaf.weighted);
  const header = {aggregationId: spec.aggregationId, fields: layouts};
  if (weighted) {
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0) {
      throw localError(`this aggregation has a weighted field; give a weight (finite, > 0), not ${weight}`);
    }
    header.weight = weight;
  } else if (weight !== undefined && weight !== null) {
    throw localError('this aggregation has no weighted field; contribute without a weight');
  }
  if (ackLevel) {
    const level = String(ackLevel).toUpperCase();
    if (level !== 'RECEIVED' && level !== 'DURABLE') throw localError(`ackLevel ${ackLevel}: RECEIVED or DURABLE`);
    header.ackLevel = level;
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  let crc = 0;
  for (const section of sections) {
    bytes.set(section, at);
    at += section.length;
  }
  crc = crc32c(bytes);
  return {header, bytes, crc32c: crc, fields: leaves};
}

// ---------------------------------------------------------------------------------------
// The client.

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
    };
    signal?.addEventListener('abort', onAbort, {once: true});
  });
}

function backoffMs(attempt, base, max) {
  const ms = Math.min(max, base * 2 ** Math.max(0, attempt - 1));
  return ms * (0.8 + 0.4 * Math.random());
}

// Errors worth trying again: the network (a cut connection, a timeout), a proxy or server
// that is unavailable or overloaded, a body that arrived damaged.
function retryable(error) {
  if (!(error instanceof FedaggError)) return true;  // fetch's TypeError, a timeout
  if (error.httpStatus === 413) return false;
  return ['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'RESOURCE_EXHAUSTED', 'CANCELLED', 'UNKNOWN', 'DATA_LOSS',
          'INTERNAL', 'NETWORK'].includes(error.code);
}

function isAbort(error, signal) {
  return signal?.aborted && (error === signal.reason || error?.name === 'AbortError');
}

export class FedaggClient {
  // baseUrl: where the server (or its load balancer) is, '' for this page's origin.
  // token: a bearer token (sent as Authorization: Bearer <token>). fetch: a fetch to use
  // instead of the global one. requestTimeoutMs: the longest one request may take.
  constructor(baseUrl = '', {token, fetch: fetchImpl, requestTimeoutMs = 120000} = {}) {
    this.baseUrl = String(baseUrl).replace(/\/+$/, '');
    this.token = token;
    this.fetchImpl = fetchImpl ?? globalThis.fetch.bind(globalThis);
    this.requestTimeoutMs = requestTimeoutMs;
  }

  _url(path, query) {
    const q = Object.entries(query).filter(([, v]) => v !== undefined && v !== null)
      .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`).join('&');
    return `${this.baseUrl}${path}${q ? `?${q}` : ''}`;
  }

  // One request. Answers the Response of a 2xx status; throws a FedaggError for any other
  // (from the server's JSON error when there is one), and a FedaggError with code
  // NETWORK when no answer came (a cut connection, a timeout).
  async _request(method, path, query, {body, headers = {}, signal} = {}) {
    const h = {...headers};
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    if (body !== undefined && !(body instanceof Uint8Array)) {
      body = JSON.stringify(body);
      h['Content-Type'] = 'application/json';
    } else if (body !== undefined) {
      h['Content-Type'] = 'application/octet-stream';
    }
    const signals = [AbortSignal.timeout(this.requestTimeoutMs)];
    if (signal) signals.push(signal);
    const url = this._url(path, query);
    let response;
    try {
      response = await this.fetchImpl(url, {method, headers: h, body, signal: AbortSignal.any(signals),
                                            cache: 'no-store'});
    } catch (e) {
      if (isAbort(e, signal)) throw e;
      throw new FedaggError('NETWORK', `${method} ${url}: no answer (${e?.message ?? e})`);
    }
    if (response.ok) return response;
    let text = '';
    try {
      text = await response.text();
    } catch (e) {
      if (isAbort(e, signal)) throw e;
    }
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (parsed && typeof parsed === 'object' && parsed.code !== undefined) {
      throw new FedaggError(codeName(parsed.code), parsed.message ?? '', {
        httpStatus: response.status, committedSize: parsed.committedSize, body: parsed});
    }
    const code = HTTP_STATUS_CODES[response.status] ?? (response.status >= 500 ? 'UNAVAILABLE' : 'UNKNOWN');
    throw new FedaggError(code, `${method} ${url}: HTTP ${response.status} ${response.statusText}` +
                          (text ? `: ${text.slice(0, 200).trim()}` : ''), {httpStatus: response.status});
  }

  async _json(method, path, query, options) {
    const response = await this._request(method, path, query, options);
    const text = await response.text();
    let value;
    try {
      value = text ? JSON.parse(text) : {};
    } catch {
      throw new FedaggError('INTERNAL', `${method} ${path}: the answer is not JSON: ${text.slice(0, 200)}`,
                            {httpStatus: response.status});
    }
    return {status: response.status, value};
  }

  // The open aggregations this client may contribute to (AggregationSpec JSON objects),
  // oldest first, at most maxTasks (the server caps it at 64).
  async getTasks(clientId, maxTasks = 1, {signal} = {}) {
    const {value} = await this._json('GET', '/v1/tasks', {client_id: clientId, max_tasks: maxTasks}, {signal});
    return value.tasks ?? [];
  }

  // The AggregationStatus (JSON: state by name, contributions as a string).
  async aggregationStatus(aggregationId, {signal} = {}) {
    return (await this._json('GET', '/v1/aggregations', {aggregation_id: aggregationId}, {signal})).value;
  }

  // The upload of (aggregationId, clientId): its UploadStatus (JSON).
  async uploadStatus(aggregationId, clientId, {signal} = {}) {
    return (await this._json('GET', '/v1/uploads', {aggregation_id: aggregationId, client_id: clientId}, {signal})).value;
  }

  // Aborts the upload of (aggregationId, clientId): nothing of it is counted.
  async abortUpload(aggregationId, clientId, {signal} = {}) {
    return (await this._json('DELETE', '/v1/uploads', {aggregation_id: aggregationId, client_id: clientId}, {signal})).value;
  }

  encodeUpdate(spec, fields, options) {
    return encodeUpdate(spec, fields, options);
  }

  // Uploads an encoded update ({header, bytes[, crc32c]}, from encodeUpdate; the whole
  // update's checksum is computed here when crc32c is not given) as client `clientId` of
  // aggregation `aggregationId`, and answers the server's ack (JSON: aggregationId,
  // contributions, level) once it is counted. Chunks of `chunkBytes` (at most the server's
  // maxChunkBytes); a failed or cut request is tried again, maxRetries times in a row at
  // most, with exponential backoff, from the size the server reports as committed. `sent`
  // in onProgress({sent, committed, total}) counts every chunk body sent, in full, retries
  // included. `signal` (an AbortSignal) stops it (the upload stays on the server until it
  // expires; abortUpload removes it).
  async upload(aggregationId, clientId, update, {chunkBytes = 1 << 20, onProgress, maxRetries = 8,
                                                          signal, backoffBaseMs = 200, backoffMaxMs = 5000} = {}) {
    const {header, bytes} = update ?? {};
    if (!clientId) throw localError('upload: a client id is needed');
    if (!(bytes instanceof Uint8Array)) throw localError('upload: bytes must be a Uint8Array (from encodeUpdate)');
    if (header?.aggregationId && header.aggregationId !== aggregationId) {
      throw localError(`upload: the header is for aggregation '${header.aggregationId}', not '${aggregationId}'`);
    }
    if (!(chunkBytes >= 1)) throw localError(`upload: chunkBytes ${chunkBytes} must be at least 1`);
    const query = {aggregation_id: aggregationId, client_id: clientId};
    const total = bytes.length;
    const wholeCrc = update.crc32c ?? crc32c(bytes);
    const body = {...header, aggregationId, clientId};
    let sent = 0;
    let committed = 0;
    let chunk = chunkBytes;
    let failures = 0;
    const progress = () => onProgress?.({sent, committed, total});

    // Throws `error` unless it is worth another try (or `retry` says it is) and tries remain;
    // else waits the backoff.
    const giveUpOr = async (error, what, retry = false) => {
      if (isAbort(error, signal)) throw error;
      if (!retry && !retryable(error)) throw error;
      failures++;
      if (failures > maxRetries) {
        if (error instanceof FedaggError) {
          error.message = `${error.message} (${what}; gave up after ${maxRetries} retries)`;
        }
        throw error;
      }
      await sleep(backoffMs(failures, backoffBaseMs, backoffMaxMs), signal);
    };

    // POST until the upload is OPEN (or already COUNTED): sets committed, answers the status.
    const start = async () => {
      for (;;) {
        let answer;
        try {
          answer = await this._json('POST', '/v1/uploads', query, {body, signal});
        } catch (e) {
          // ABORTED: another update of this client is in flight (a gRPC stream, a claim held
          // elsewhere in the tree) and may end; try again as for an unavailable server.
          await giveUpOr(e, 'starting the upload', e instanceof FedaggError && e.code === 'ABORTED');
          continue;
        }
        const status = answer.value;
        if (status.state === 'WAITING') {  // the server held it ~10 s already: ask again soon
          await sleep(250, signal);
          continue;
        }
        if (status.state === 'COUNTED') return status;
        if (status.state === 'FAILED') throw statusError(status, 'the upload failed');
        if (status.state !== 'OPEN') throw new FedaggError('INTERNAL', `start answered state ${status.state}`);
        absorb(status);
        return status;
      }
    };
    const absorb = (status) => {
      committed = Number(status.committedSize ?? 0);
      if (status.totalSize !== undefined && Number(status.totalSize) !== total) {
        throw new FedaggError('FAILED_PRECONDITION', `the server's upload holds ${status.totalSize} bytes; this update has ${total}`);
      }
      const max = Number(status.maxChunkBytes ?? 0);
      if (max > 0 && chunk > max) chunk = max;
    };
    // After a network error: where the server stands (a restart from 0 when it lost the upload).
    const resync = async () => {
      for (;;) {
        try {
          const status = await this.uploadStatus(aggregationId, clientId, {signal});
          if (status.state === 'COUNTED') return status;
          if (status.state === 'FAILED') throw statusError(status, 'the upload failed');
          if (status.state === 'WAITING' || status.state === 'ABORTED') return start();
          absorb(status);
          return status;
        } catch (e) {
          if (e instanceof FedaggError && e.code === 'NOT_FOUND') return start();
          await giveUpOr(e, 'asking for the upload\'s status');
        }
      }
    };

    let status = await start();
    progress();
    for (;;) {
      if (status.state === 'COUNTED') return status.ack;
      // Write what is missing.
      while (committed < total) {
        const end = Math.min(total, committed + chunk);
        const piece = bytes.subarray(committed, end);
        sent += piece.length;
        try {
          const answer = await this._json('PATCH', '/v1/uploads', query, {
            body: piece, signal,
            headers: {'Upload-Offset': String(committed), 'Upload-Crc32c': String(crc32c(piece))}});
          const before = committed;
          absorb(answer.value);
          if (committed > before) failures = 0;
        } catch (e) {
          if (e instanceof FedaggError && e.code === 'ABORTED' && e.committedSize !== undefined) {
            committed = e.committedSize;  // the server committed less (or more) than we knew: write from there
            if (++failures > maxRetries) throw e;
          } else if (e instanceof FedaggError && e.code === 'NOT_FOUND') {
            await giveUpOr(e, 'the upload was lost', true);
            status = await start();
            if (status.state === 'COUNTED') return status.ack;
          } else if (e instanceof FedaggError && e.httpStatus === 413 && chunk > 65536) {
            chunk = Math.max(65536, Math.floor(chunk / 2));  // a proxy with a smaller body limit
          } else {
            await giveUpOr(e, `writing bytes ${committed}..${end}`);
            if (e instanceof FedaggError && e.committedSize !== undefined) {
              committed = e.committedSize;  // the server answered (DATA_LOSS, ...) and said where it stands
            } else {
              status = await resync();  // no answer: ask where it stands
              if (status.state === 'COUNTED') return status.ack;
            }
          }
        }
        progress();
      }
      // Submit, with the whole update's checksum.
      let answer;
      try {
        answer = await this._json('POST', '/v1/uploads:submit', query, {body: {crc32c: wholeCrc}, signal});
      } catch (e) {
        if (e instanceof FedaggError && e.code === 'FAILED_PRECONDITION' && e.committedSize !== undefined &&
            e.committedSize < total) {
          committed = e.committedSize;  // the server has less than we thought: write the rest
          await giveUpOr(e, 'submitting an incomplete upload', true);
          continue;
        }
        if (e instanceof FedaggError && e.code === 'NOT_FOUND') {
          await giveUpOr(e, 'the upload was lost before its submit', true);
          status = await start();
          continue;
        }
        if (e instanceof FedaggError && e.code !== 'NETWORK' && !['UNAVAILABLE', 'DEADLINE_EXCEEDED'].includes(e.code)) {
          throw e;  // a refusal of the update (its values, its checksum, the aggregation closed)
        }
        await giveUpOr(e, 'submitting');
        continue;
      }
      status = answer.value;
      if (status.state === 'COUNTED') return status.ack;
      if (status.state === 'COUNTING') {  // the server held it ~10 s already: ask again soon
        await sleep(250, signal);
        continue;
      }
      if (status.state === 'FAILED') throw statusError(status, 'the update was refused at submit');
      throw new FedaggError('INTERNAL', `submit answered state ${status.state}`);
    }
  }

  // encodeUpdate + upload: contributes `fields` to the aggregation of `task` (a spec from
  // getTasks) as `clientId`; options of both (weight, ackLevel, chunkBytes, onProgress, ...).
  async contribute(task, clientId, fields, options = {}) {
    const update = encodeUpdate(task, fields, options);
    return this.upload(task.aggregationId, clientId, update, options);
  }

  // The result of a FINALIZED aggregation: {status (AggregationStatus JSON), fields: [{path,
  // intrinsic, dtype, shape, values (a typed array: Float32Array, Float64Array,
  // BigInt64Array), indices (BigInt64Array: sparse_sum_sparse only), counts (BigInt64Array:
  // when the spec asked for them)}]}.
  async result(aggregationId, {signal} = {}) {
    const {value: head} = await this._json('GET', '/v1/results', {aggregation_id: aggregationId}, {signal});
    const fields = [];
    const headers = head.fields ?? [];
    for (let i = 0; i < headers.length; i++) {
      const fh = headers[i];
      const dtype = dtypeName(fh.value?.dtype);
      const shape = (fh.value?.shape ?? []).map(Number);
      const intrinsic = intrinsicName(fh.intrinsic);
      const n = product(shape);
      const field = {path: fh.path, intrinsic, dtype, shape};
      field.values = await this._part(aggregationId, i, 'VALUES', n, dtype, signal);
      if (intrinsic === 'SPARSE_SUM_SPARSE') {
        field.indices = await this._part(aggregationId, i, 'INDICES', Number(fh.nnz ?? 0), 'int64', signal);
      }
      if (fh.hasCounts) {
        // per coordinate (sparse family), per row (row-sparse), per index (sparse_sum_sparse)
        const count = intrinsic === 'SPARSE_SUM_SPARSE' ? Number(fh.nnz ?? 0) :
          ROW_SPARSE.has(intrinsic) ? (shape[0] ?? 0) : n;
        field.counts = await this._part(aggregationId, i, 'COUNTS', count, 'int64', signal);
      }
      fields.push(field);
    }
    return {status: head.status, fields};
  }

  async _part(aggregationId, field, part, count, dtype, signal) {
    const {size, array} = DTYPES[dtype];
    if (count === 0) return new array(0);
    const response = await this._request('GET', '/v1/results', {aggregation_id: aggregationId, field, part}, {signal});
    const buffer = await response.arrayBuffer();
    if (buffer.byteLength !== count * size) {
      throw new FedaggError('DATA_LOSS', `result field ${field} ${part}: ${buffer.byteLength} bytes, expected ${count * size}`);
    }
    return new array(buffer);
  }
}

function statusError(status, what) {
  const error = status.error ?? {};
  return new FedaggError(codeName(error.code) ?? 'UNKNOWN', error.message ?? what,
                         {committedSize: status.committedSize, body: status});
}
