// Smaller pieces of the chain builder: the preview tables, the feed URLs
// with their Copy buttons, the selected node's panel.
import { useEffect, useId, useMemo, useRef, useState } from 'react';
import ConfigForm from './ConfigForm.jsx';
import { checkNodeId, exampleConfig, inputsOf, wouldCycle } from './graph.js';
import { formModel, controls } from './schema.js';
import { placeErrors } from './errors.js';
import { inputsText } from './palette.js';
import { itemRow } from './preview.js';

/** ItemsTable lists preview items: time, title, value and unit. */
export function ItemsTable({ caption, items, count }) {
  if (!items || items.length === 0) return <p className="sb-hint">{caption}: no items.</p>;
  return (
    <div className="sb-table-wrap" tabIndex={0} role="group" aria-label={caption}>
      <table className="sb-table">
        <caption>
          {caption}: {count > items.length ? `the first ${items.length} of ${count} items` : `${items.length} item${items.length === 1 ? '' : 's'}`}
        </caption>
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Title</th>
            <th scope="col">Value</th>
          </tr>
        </thead>
        <tbody>
          {items.map((it, i) => {
            const r = itemRow(it);
            return (
              <tr key={i}>
                <td data-label="Time">
                  <time dateTime={r.iso}>{r.time}</time>
                </td>
                <td data-label="Title">{r.title}</td>
                <td data-label="Value" className="sb-num">
                  {r.value}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

const FORMAT_NAMES = { rss: 'RSS', atom: 'Atom', json: 'JSON Feed' };

/** copyText puts text on the clipboard, or selects el's text for the user to copy. */
async function copyText(text, el) {
  try {
    if (!navigator.clipboard?.writeText) throw new Error('no clipboard');
    await navigator.clipboard.writeText(text);
    return 'Copied';
  } catch {
    const sel = window.getSelection();
    if (el && sel) {
      sel.removeAllRanges();
      const range = document.createRange();
      range.selectNodeContents(el);
      sel.addRange(range);
    }
    return 'Selected: press Ctrl+C (⌘C) to copy';
  }
}

function FeedLink({ format, url }) {
  const ref = useRef(null);
  const [note, setNote] = useState('');
  const name = FORMAT_NAMES[format] || format;
  return (
    <li className="sb-feed-link">
      <span className="sb-feed-format">{name}</span>{' '}
      <a ref={ref} href={url}>
        {url}
      </a>{' '}
      <button type="button" onClick={async () => setNote(await copyText(url, ref.current))}>
        Copy
      </button>
      <span className="sb-copy-note" role="status">
        {note}
      </span>
    </li>
  );
}

/** FeedLinks shows a saved pipe's republished feeds as absolute URLs with Copy buttons. */
export function FeedLinks({ feeds, origin }) {
  const order = ['rss', 'atom', 'json'];
  const entries = Object.entries(feeds || {})
    .filter(([, path]) => typeof path === 'string' && path.startsWith('/'))
    .sort(([a], [b]) => (order.indexOf(a) + 1 || 9) - (order.indexOf(b) + 1 || 9));
  if (entries.length === 0) return null;
  return (
    <section className="sb-section" aria-labelledby="sb-feeds-h">
      <h2 id="sb-feeds-h">Republished feeds</h2>
      <ul className="sb-feed-links">
        {entries.map(([format, path]) => (
          <FeedLink key={format} format={format} url={origin + path} />
        ))}
      </ul>
    </section>
  );
}

/** NodeIdInput renames the node; an id that is not allowed stays in the box with the reason. */
function NodeIdInput({ id, nodes, onRename, serverErrors }) {
  const inputId = useId();
  const [text, setText] = useState(id);
  useEffect(() => setText(id), [id]);
  const local = text === id ? '' : checkNodeId(text, id, nodes);
  const msgs = local ? [local] : serverErrors || [];
  // A <p> of phrasing content, not a <div>: the panel section is the
  // innermost block around the "Node id" box.
  return (
    <p className={`sb-field${msgs.length ? ' sb-invalid' : ''}`}>
      <label htmlFor={inputId}>Node id</label>
      <input
        id={inputId}
        type="text"
        value={text}
        spellCheck={false}
        autoComplete="off"
        aria-invalid={msgs.length ? true : undefined}
        aria-describedby={msgs.length ? `${inputId}-err` : undefined}
        onChange={(e) => {
          const t = e.target.value;
          setText(t);
          if (t !== id && checkNodeId(t, id, nodes) === '') onRename(t);
        }}
        onBlur={() => setText(id)}
      />
      {msgs.length > 0 && (
        <span className="sb-field-error" id={`${inputId}-err`}>
          {msgs.join('; ')}
        </span>
      )}
    </p>
  );
}

/**
 * NodePanel edits the selected node: its id, its inputs, its
 * configuration, and shows its preview output and errors.
 */
export function NodePanel({ node, state, info, dispatch, onSelect, errors, output, feedList, clientProblems }) {
  const model = useMemo(() => formModel(info), [info]);
  const paths = useMemo(() => controls(model, node.config).map((c) => c.path), [model, node.config]);
  const placed = useMemo(() => placeErrors(errors?.fields, paths), [errors, paths]);
  const inputs = inputsOf(state, node.id);
  const others = state.nodes.filter((n) => n.id !== node.id);
  const noInputs = info && info.max_inputs === 0;
  const headingId = useId();
  return (
    <section className="sb-section sb-node-panel" aria-labelledby={headingId}>
      <h2 id={headingId}>
        Node {node.id} <span className="sb-op-name">({node.op})</span>
      </h2>
      {info?.doc && <p className="sb-hint">{info.doc}</p>}
      {(errors?.node?.length > 0 || placed.rest.length > 0) && (
        <ul className="sb-field-error sb-node-errors">
          {[...(errors?.node || []), ...placed.rest].map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
      {clientProblems.length > 0 && (
        <ul className="sb-hint sb-node-problems">
          {clientProblems.map((p, i) => (
            <li key={i}>{p}</li>
          ))}
        </ul>
      )}
      <NodeIdInput
        id={node.id}
        nodes={state.nodes}
        serverErrors={errors?.fields?.['#id']}
        onRename={(to) => {
          dispatch({ type: 'renameNode', id: node.id, to });
          onSelect(to);
        }}
      />
      <fieldset className="sb-group sb-inputs" disabled={noInputs && inputs.length === 0}>
        <legend>Inputs</legend>
        {noInputs && <p className="sb-hint">A {node.op} node reads a feed and takes no input.</p>}
        {others.length === 0 && <p className="sb-hint">Add another node to connect it here.</p>}
        {others.map((o) => {
          const checked = inputs.includes(o.id);
          const loops = !checked && wouldCycle(state.edges, o.id, node.id);
          return (
            <div className="sb-field sb-check" key={o.key}>
              <input
                id={`${headingId}-in-${o.key}`}
                type="checkbox"
                checked={checked}
                disabled={loops}
                aria-describedby={loops ? `${headingId}-in-${o.key}-note` : undefined}
                onChange={(e) => dispatch({ type: 'setInput', id: node.id, from: o.id, on: e.target.checked })}
              />
              <label htmlFor={`${headingId}-in-${o.key}`}>{o.id}</label>
              {loops && (
                <span className="sb-hint" id={`${headingId}-in-${o.key}-note`}>
                  {' '}
                  (would make a cycle)
                </span>
              )}
            </div>
          );
        })}
        {info && !noInputs && <p className="sb-hint">{inputsText(info)}</p>}
      </fieldset>
      <fieldset className="sb-group sb-config">
        <legend>Configuration</legend>
        {info && Object.keys(info.example || {}).length > 0 && (
          <button
            type="button"
            className="sb-add sb-example"
            aria-describedby={`${headingId}-example`}
            onClick={() => dispatch({ type: 'setConfig', id: node.id, config: exampleConfig(info) })}
          >
            Fill with example
          </button>
        )}
        {info && Object.keys(info.example || {}).length > 0 && (
          <p className="sb-hint" id={`${headingId}-example`}>
            Example: <code>{JSON.stringify(info.example)}</code>
          </p>
        )}
        {info ? (
          <ConfigForm
            model={model}
            config={node.config}
            errors={placed.byPath}
            feedList={feedList}
            onChange={(config) => dispatch({ type: 'setConfig', id: node.id, config })}
          />
        ) : (
          <p className="sb-field-error">Unknown operator {node.op}.</p>
        )}
      </fieldset>
      <button type="button" className="sb-danger" onClick={() => dispatch({ type: 'removeNode', id: node.id })}>
        Delete node
      </button>
      <div className="sb-node-output">
        <h3>Output of {node.id}</h3>
        {output ? (
          <>
            {output.error && <p className="sb-field-error">{output.error}</p>}
            <ItemsTable caption={`Items of ${node.id}`} items={output.items} count={output.count} />
          </>
        ) : (
          <p className="sb-hint">Not previewed yet.</p>
        )}
      </div>
    </section>
  );
}
