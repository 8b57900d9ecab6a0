// The configuration form of one node, generated from its operator's JSON
// Schema (see schema.js): one labelled control per property, labelled
// with the property's name, the schema's description as help text, and
// the server's error about that field beside it.
import { useEffect, useId, useMemo, useState } from 'react';
import {
  anyToText,
  textToAny,
  durationToText,
  textToDuration,
  numberToText,
  textToNumber,
  emptyValue,
  freeKey,
  getIn,
  hint,
  pathString,
  removeAt,
  renameKey,
  setIn,
} from './schema.js';

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * useDraft keeps what the user is typing in a text control whose value is
 * parsed (numbers, durations, JSON): the text stays as typed while it
 * reads as the current value, and follows the value when it changes from
 * elsewhere.
 */
function useDraft(value, toText, fromText) {
  const [text, setText] = useState(() => toText(value));
  useEffect(() => {
    setText((t) => (same(fromText(t), value) ? t : toText(value)));
  }, [value, toText, fromText]);
  return [text, setText];
}

function Help({ id, text }) {
  if (!text) return null;
  return (
    <p className="sb-hint" id={id}>
      {text}
    </p>
  );
}

function FieldErrors({ id, messages }) {
  if (!messages || messages.length === 0) return null;
  return (
    <ul className="sb-field-error" id={id}>
      {messages.map((m, i) => (
        <li key={i}>{m}</li>
      ))}
    </ul>
  );
}

function describedBy(...ids) {
  const s = ids.filter(Boolean).join(' ');
  return s || undefined;
}

const textKinds = {
  number: [numberToText, (t) => textToNumber(t, false)],
  integer: [numberToText, (t) => textToNumber(t, true)],
  duration: [durationToText, textToDuration],
  any: [anyToText, textToAny],
  string: [(v) => (v == null ? '' : String(v)), (t) => (t === '' ? undefined : t)],
};

/**
 * converters are the text ↔ value functions of a kind. With keepEmpty
 * (array items, map values) an empty text is the empty string, so
 * clearing a control does not remove the item.
 */
function converters(kind, keepEmpty) {
  const [toText, fromText] = textKinds[kind] || textKinds.string;
  if (!keepEmpty) return [toText, fromText];
  return [(v) => (v === '' ? '' : toText(v)), (t) => (t === '' ? '' : fromText(t))];
}

/** TextControl is a labelled text input whose text is parsed into the value. */
function TextControl({ label, model, value, onChange, errors, list, multiline, keepEmpty }) {
  const id = useId();
  const [toText, fromText] = useMemo(() => converters(model.kind, keepEmpty), [model.kind, keepEmpty]);
  const [text, setText] = useDraft(value, toText, fromText);
  const help = hint(model);
  const hintId = help ? `${id}-hint` : '';
  const errId = errors.length ? `${id}-err` : '';
  const props = {
    id,
    value: text,
    'aria-invalid': errors.length ? true : undefined,
    'aria-describedby': describedBy(errId, hintId),
    onChange: (e) => {
      setText(e.target.value);
      onChange(fromText(e.target.value));
    },
  };
  let placeholder;
  if (model.default !== undefined) placeholder = String(model.default);
  else if (model.kind === 'duration') placeholder = 'e.g. 5m';
  return (
    <div className={`sb-field${errors.length ? ' sb-invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      {multiline ? (
        <textarea {...props} rows={3} spellCheck={false} />
      ) : (
        <input
          {...props}
          type="text"
          list={list}
          placeholder={placeholder}
          inputMode={model.kind === 'integer' ? 'numeric' : model.kind === 'number' ? 'decimal' : undefined}
          spellCheck={false}
          autoComplete="off"
        />
      )}
      <FieldErrors id={errId} messages={errors} />
      <Help id={hintId} text={help} />
    </div>
  );
}

function BoolControl({ label, model, value, onChange, errors }) {
  const id = useId();
  const help = hint(model);
  const hintId = help ? `${id}-hint` : '';
  const errId = errors.length ? `${id}-err` : '';
  return (
    <div className={`sb-field sb-check${errors.length ? ' sb-invalid' : ''}`}>
      <input
        id={id}
        type="checkbox"
        checked={value === true}
        aria-invalid={errors.length ? true : undefined}
        aria-describedby={describedBy(errId, hintId)}
        onChange={(e) => onChange(e.target.checked ? true : undefined)}
      />
      <label htmlFor={id}>{label}</label>
      <FieldErrors id={errId} messages={errors} />
      <Help id={hintId} text={help} />
    </div>
  );
}

function EnumControl({ label, model, value, onChange, errors }) {
  const id = useId();
  const help = hint(model);
  const hintId = help ? `${id}-hint` : '';
  const errId = errors.length ? `${id}-err` : '';
  const current = value === undefined || value === null ? '' : String(value);
  const known = model.options.includes(current) || current === '';
  return (
    <div className={`sb-field${errors.length ? ' sb-invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      <select
        id={id}
        value={current}
        aria-invalid={errors.length ? true : undefined}
        aria-describedby={describedBy(errId, hintId)}
        onChange={(e) => onChange(e.target.value === '' ? undefined : e.target.value)}
      >
        <option value="">(default)</option>
        {model.options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
        {!known && <option value={current}>{current}</option>}
      </select>
      <FieldErrors id={errId} messages={errors} />
      <Help id={hintId} text={help} />
    </div>
  );
}

/** MapKey edits the key of one map entry; a key already taken is not applied. */
function MapKey({ value, onRename, taken, label }) {
  const id = useId();
  const [text, setText] = useState(value);
  useEffect(() => setText(value), [value]);
  const bad = text === '' ? 'a key is needed' : text !== value && taken.includes(text) ? `${text} is already a key` : '';
  return (
    <div className={`sb-field${bad ? ' sb-invalid' : ''}`}>
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        type="text"
        value={text}
        spellCheck={false}
        autoComplete="off"
        aria-invalid={bad ? true : undefined}
        aria-describedby={bad ? `${id}-err` : undefined}
        onChange={(e) => {
          setText(e.target.value);
          const t = e.target.value;
          if (t !== '' && !taken.includes(t)) onRename(t);
        }}
        onBlur={() => setText(value)}
      />
      {bad && (
        <p className="sb-field-error" id={`${id}-err`}>
          {bad}
        </p>
      )}
    </div>
  );
}

/**
 * Field renders the control(s) of one model at path in the whole
 * configuration root; change(path, value) sets a value there.
 */
function Field({ model, label, path, root, change, replace, ctx, keepEmpty }) {
  const value = getIn(root, path);
  const p = pathString(path);
  const errors = ctx.errors[p] || [];
  const set = (v) => change(path, v);
  switch (model.kind) {
    case 'boolean':
      return <BoolControl label={label} model={model} value={value} onChange={set} errors={errors} />;
    case 'enum':
      return <EnumControl label={label} model={model} value={value} onChange={set} errors={errors} />;
    case 'object':
      return (
        <fieldset className={`sb-group${errors.length ? ' sb-invalid' : ''}`}>
          <legend>{label}</legend>
          <FieldErrors messages={errors} />
          {model.description && <p className="sb-hint">{model.description}</p>}
          {model.fields.map((f) => (
            <Field key={f.name} model={f} label={f.name} path={[...path, f.name]} root={root} change={change} replace={replace} ctx={ctx} />
          ))}
        </fieldset>
      );
    case 'array': {
      const items = Array.isArray(value) ? value : [];
      return (
        <fieldset className={`sb-group${errors.length ? ' sb-invalid' : ''}`}>
          <legend>{label}</legend>
          <FieldErrors messages={errors} />
          {model.description && <p className="sb-hint">{model.description}</p>}
          {items.map((_, i) => (
            <div className="sb-item" key={i}>
              {model.item.kind === 'object' ? (
                <fieldset className="sb-group">
                  <legend>
                    {model.name} {i + 1}
                  </legend>
                  <FieldErrors messages={ctx.errors[pathString([...path, i])]} />
                  {model.item.fields.map((f) => (
                    <Field key={f.name} model={f} label={f.name} path={[...path, i, f.name]} root={root} change={change} replace={replace} ctx={ctx} />
                  ))}
                  <button type="button" className="sb-remove" onClick={() => replace(removeAt(root, path, i))}>
                    Remove
                  </button>
                </fieldset>
              ) : (
                <div className="sb-row">
                  <Field model={model.item} label={`${model.name} ${i + 1}`} path={[...path, i]} root={root} change={change} replace={replace} ctx={ctx} keepEmpty />
                  <button type="button" className="sb-remove" onClick={() => replace(removeAt(root, path, i))}>
                    Remove
                  </button>
                </div>
              )}
            </div>
          ))}
          <button type="button" className="sb-add" onClick={() => change([...path, items.length], emptyValue(model.item))}>
            Add {model.name}
          </button>
        </fieldset>
      );
    }
    case 'map': {
      const obj = value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {};
      const keys = Object.keys(obj);
      return (
        <fieldset className={`sb-group${errors.length ? ' sb-invalid' : ''}`}>
          <legend>{label}</legend>
          <FieldErrors messages={errors} />
          {model.description && <p className="sb-hint">{model.description}</p>}
          {keys.map((k, i) => (
            <fieldset className="sb-group sb-item" key={i}>
              <legend>
                {model.name}: {k}
              </legend>
              <MapKey label="key" value={k} taken={keys} onRename={(to) => replace(renameKey(root, path, k, to))} />
              {model.value.kind === 'object' ? (
                model.value.fields.map((f) => (
                  <Field key={f.name} model={f} label={f.name} path={[...path, k, f.name]} root={root} change={change} replace={replace} ctx={ctx} />
                ))
              ) : (
                <Field model={model.value} label={k} path={[...path, k]} root={root} change={change} replace={replace} ctx={ctx} keepEmpty />
              )}
              <button type="button" className="sb-remove" onClick={() => change([...path, k], undefined)}>
                Remove
              </button>
            </fieldset>
          ))}
          <button type="button" className="sb-add" onClick={() => change([...path, freeKey(obj)], emptyValue(model.value))}>
            Add {model.name}
          </button>
        </fieldset>
      );
    }
    default:
      return (
        <TextControl
          label={label}
          model={model}
          value={value}
          onChange={set}
          errors={errors}
          list={model.suggest === 'feeds' ? ctx.feedList : undefined}
          multiline={model.kind === 'any' && model.name === 'config'}
          keepEmpty={keepEmpty}
        />
      );
  }
}

/**
 * ConfigForm edits config (an object) with the form model of its
 * operator. errors maps field paths ("rules[0].value") to messages.
 */
export default function ConfigForm({ model, config, onChange, errors, feedList }) {
  const root = config !== null && typeof config === 'object' && !Array.isArray(config) ? config : {};
  const change = (path, v) => onChange(setIn(root, path, v));
  const replace = (next) => onChange(next);
  const ctx = { errors: errors || {}, feedList };
  if (model.fields.length === 0) return <p className="sb-hint">This operator has nothing to configure.</p>;
  return (
    <div className="sb-form">
      {model.fields.map((f) => (
        <Field key={f.name} model={f} label={f.name} path={[f.name]} root={root} change={change} replace={replace} ctx={ctx} />
      ))}
    </div>
  );
}
