// Operator configuration forms from the JSON Schemas of GET
// /api/v1/operators (transform/catalog_schema.go). Only the subset the
// catalogue uses is read: object/properties with x-order, string, number,
// integer, boolean, enum, ["string","number"] durations, arrays, maps
// (additionalProperties) and untyped values ({}), with description,
// default, minimum and maximum. Nothing is validated here: the server
// checks a configuration and its 400 names the field at fault.

const MAX_DEPTH = 8;

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Field kinds of the form model:
 *   string, number, integer, boolean, enum   one control
 *   duration   "90s" or a number of seconds (schema type ["string","number"])
 *   any        any JSON value, typed as text (see textToAny)
 *   object     nested fields
 *   array      a list of items of model `item`
 *   map        keyed entries of model `value` (additionalProperties)
 */
export function fieldModel(name, schema, depth = 0) {
  const s = isObject(schema) ? schema : {};
  const f = { name, kind: 'any' };
  if (typeof s.description === 'string') f.description = s.description;
  if (s.default !== undefined) f.default = s.default;
  if (Number.isFinite(s.minimum)) f.min = s.minimum;
  if (Number.isFinite(s.maximum)) f.max = s.maximum;
  const t = s.type;
  if (Array.isArray(s.enum) && s.enum.length > 0) {
    f.kind = 'enum';
    f.options = s.enum.map(String);
    return f;
  }
  if (Array.isArray(t)) {
    const set = new Set(t);
    if (set.size === 2 && set.has('string') && set.has('number')) f.kind = 'duration';
    return f;
  }
  switch (t) {
    case 'string':
    case 'number':
    case 'integer':
    case 'boolean':
      f.kind = t;
      return f;
    case 'array':
      f.kind = 'array';
      f.item = depth >= MAX_DEPTH ? { name, kind: 'any' } : fieldModel(name, s.items, depth + 1);
      return f;
    case 'object':
      if (isObject(s.properties) && Object.keys(s.properties).length > 0) {
        f.kind = 'object';
        f.fields = depth >= MAX_DEPTH ? [] : objectFields(s, depth + 1);
        return f;
      }
      if (isObject(s.additionalProperties)) {
        f.kind = 'map';
        f.value = depth >= MAX_DEPTH ? { name: 'value', kind: 'any' } : fieldModel('value', s.additionalProperties, depth + 1);
        return f;
      }
      return f; // an object of unknown shape: JSON text
    default:
      return f;
  }
}

/** objectFields lists the properties of an object schema, in x-order, then the rest by name. */
export function objectFields(schema, depth = 0) {
  const props = isObject(schema?.properties) ? schema.properties : {};
  const order = Array.isArray(schema?.['x-order']) ? schema['x-order'].filter((k) => typeof k === 'string' && k in props) : [];
  const rest = Object.keys(props)
    .filter((k) => !order.includes(k))
    .sort();
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  return [...new Set([...order, ...rest])].map((k) => {
    const f = fieldModel(k, props[k], depth);
    if (required.has(k)) f.required = true;
    return f;
  });
}

/**
 * formModel is the form of an operator's configuration: {fields: [...]}.
 * A source's "feed" field is marked to offer the known feeds.
 */
export function formModel(op) {
  const fields = objectFields(op?.schema);
  if (op?.name === 'source') {
    for (const f of fields) if (f.name === 'feed') f.suggest = 'feeds';
  }
  return { fields };
}

/**
 * pathString writes a path (an array of keys and indexes) the way the
 * server names fields in errors: rules[2].value, sensors.lab-1.offset.
 */
export function pathString(path) {
  let s = '';
  for (const p of path) {
    if (typeof p === 'number') s += `[${p}]`;
    else s += s === '' ? p : `.${p}`;
  }
  return s;
}

/** getIn reads the value at path in v (undefined when absent). */
export function getIn(v, path) {
  let cur = v;
  for (const p of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = cur[p];
  }
  return cur;
}

/**
 * setIn returns a copy of v with value at path (missing containers are
 * made: an array for a numeric key, else an object). Setting undefined
 * removes an object key; array slots become null.
 */
export function setIn(v, path, value) {
  if (path.length === 0) return value;
  const [k, ...rest] = path;
  if (typeof k === 'number') {
    const arr = Array.isArray(v) ? v.slice() : [];
    while (arr.length < k) arr.push(null);
    arr[k] = setIn(arr[k], rest, value);
    if (arr[k] === undefined) arr[k] = null;
    return arr;
  }
  const obj = isObject(v) ? { ...v } : {};
  const next = setIn(obj[k], rest, value);
  if (next === undefined) delete obj[k];
  else obj[k] = next;
  return obj;
}

/** removeAt returns a copy of the array at path without its index i. */
export function removeAt(v, path, i) {
  const arr = getIn(v, path);
  if (!Array.isArray(arr)) return v;
  return setIn(v, path, arr.filter((_, j) => j !== i));
}

/** renameKey returns a copy of the object at path with key from renamed to to, in place. */
export function renameKey(v, path, from, to) {
  const obj = getIn(v, path);
  if (!isObject(obj) || from === to || !(from in obj) || to in obj) return v;
  const out = {};
  for (const [k, x] of Object.entries(obj)) out[k === from ? to : k] = x;
  return setIn(v, path, out);
}

/** freeKey is a key not in obj: key1, key2… */
export function freeKey(obj, base = 'key') {
  for (let i = 1; ; i++) {
    if (!isObject(obj) || !(`${base}${i}` in obj)) return `${base}${i}`;
  }
}

/**
 * emptyValue is what "Add" appends for a field model: an object with no
 * keys for objects (the server applies defaults), '' for text, undefined
 * (nothing yet) for numbers.
 */
export function emptyValue(model) {
  switch (model.kind) {
    case 'object':
    case 'map':
      return {};
    case 'array':
      return [];
    case 'boolean':
      return false;
    case 'enum':
      return model.options[0];
    case 'string':
    case 'any':
    case 'duration':
      return '';
    default:
      return undefined;
  }
}

/**
 * anyToText shows a JSON value of an untyped field: a string as itself
 * when that text does not read as other JSON, anything else as JSON.
 * textToAny(anyToText(v)) gives v back.
 */
export function anyToText(v) {
  if (v === undefined) return '';
  if (typeof v === 'string') {
    if (v === '') return '""';
    try {
      JSON.parse(v);
    } catch {
      return v;
    }
  }
  return JSON.stringify(v);
}

/**
 * textToAny reads what was typed in an untyped field: JSON when it parses
 * (25, true, "x", [1,2], {"a":1}), else the text as a string; '' is
 * undefined (the field left out).
 */
export function textToAny(s) {
  if (s === '') return undefined;
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** durationToText shows a duration field ("5m", or a number of seconds). */
export function durationToText(v) {
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return typeof v === 'string' ? v : '';
}

/** textToDuration reads a duration field: a number of seconds, else the text ("90s"). */
export function textToDuration(s) {
  const t = s.trim();
  if (t === '') return undefined;
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  return t;
}

/**
 * textToNumber reads a number field: undefined for '', the number, or
 * the text itself when it is not one (so the server names the mistake
 * instead of it vanishing).
 */
export function textToNumber(s, integer = false) {
  const t = s.trim();
  if (t === '') return undefined;
  const n = Number(t);
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n))) return t;
  return n;
}

/** numberToText shows a number field. */
export function numberToText(v) {
  if (v === undefined || v === null) return '';
  return String(v);
}

/**
 * hint is the help text of a field: its description, its bounds and its
 * default.
 */
export function hint(model) {
  const parts = [];
  if (model.description) parts.push(model.description);
  if (model.min !== undefined && model.max !== undefined) parts.push(`${model.min} to ${model.max}`);
  else if (model.min !== undefined) parts.push(`at least ${model.min}`);
  else if (model.max !== undefined) parts.push(`at most ${model.max}`);
  if (model.default !== undefined) parts.push(`default ${JSON.stringify(model.default)}`);
  return parts.join('; ');
}

/**
 * controls flattens a model for a configuration value into the controls a
 * form shows: [{path, model}] for every leaf and container, depth first,
 * the paths as pathString writes them. The form and its tests share it.
 */
export function controls(model, config) {
  const out = [];
  const walk = (fields, value, path) => {
    for (const f of fields) visit(f, getIn(value, [f.name]), [...path, f.name]);
  };
  const visit = (f, v, path) => {
    out.push({ path: pathString(path), kind: f.kind, name: f.name });
    if (f.kind === 'object') walk(f.fields, v, path);
    else if (f.kind === 'array' && Array.isArray(v)) v.forEach((x, i) => visit(f.item, x, [...path, i]));
    else if (f.kind === 'map' && isObject(v)) for (const k of Object.keys(v)) visit(f.value, v[k], [...path, k]);
  };
  walk(model.fields, config, []);
  return out;
}
