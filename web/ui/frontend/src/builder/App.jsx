// The chain builder: the pipe's name, slug and title on top; below them
// the operator palette, the React Flow canvas and a side panel that
// scrolls on its own, with everything the canvas does, operable from the
// keyboard (the node list, the selected node's id, inputs, configuration
// and preview output) and, always in view at its foot, the output,
// trigger, preview and save. On a narrow screen the canvas comes first,
// then the palette and the panel.
import { useCallback, useEffect, useId, useLayoutEffect, useMemo, useReducer, useRef, useState } from 'react';
import Canvas from './Canvas.jsx';
import Palette from './Palette.jsx';
import { FeedLinks, ItemsTable, NodePanel } from './parts.jsx';
import { api, loginURL, pageInfo, searchFeeds, setCSRFToken } from '../lib/api.js';
import {
  emptyState,
  fromPipe,
  outputNode,
  problems,
  reducer,
  semanticKey,
  sinks,
  slugify,
  sourceOptions,
  toPipe,
  TRIGGERS,
  COLUMN,
} from './graph.js';
import { errorMap, errorState } from './errors.js';
import { indexPreview } from './preview.js';

const LIVE_DELAY_MS = 600;
// How long the feed box waits after a key before it asks for suggestions.
const SEARCH_DELAY_MS = 250;

const TRIGGER_HELP = {
  update: 'runs whenever an input gains items',
  mdpt: 'runs on every input update, like update; rounds of m inputs are tracked, input fetches are not brought forward (to republish m of n, use a join with min m)',
  cron: 'runs on a schedule',
  manual: 'runs only when asked through the API',
};

/**
 * useFillViewport keeps the CSS variable --sb-top of the element ref
 * names at its distance from the top of the page, which its stylesheet
 * uses to make it fill the rest of the window. It is measured again
 * whenever the page or the window changes size.
 */
function useFillViewport(ref, ready) {
  useLayoutEffect(() => {
    const el = ref.current;
    if (!ready || !el) return undefined;
    let last = '';
    const place = () => {
      const top = `${Math.max(0, Math.round(el.getBoundingClientRect().top + window.scrollY))}px`;
      if (top === last) return;
      last = top;
      el.style.setProperty('--sb-top', top);
    };
    place();
    const ro = new ResizeObserver(place);
    ro.observe(document.body);
    window.addEventListener('resize', place);
    return () => {
      ro.disconnect();
      window.removeEventListener('resize', place);
    };
  }, [ref, ready]);
}

function Field({ label, id, errors, hint, children, className }) {
  const errId = `${id}-err`;
  const hintId = `${id}-hint`;
  return (
    <div className={`sb-field${errors?.length ? ' sb-invalid' : ''}${className ? ` ${className}` : ''}`}>
      <label htmlFor={id}>{label}</label>
      {children({
        id,
        'aria-invalid': errors?.length ? true : undefined,
        'aria-describedby': [errors?.length ? errId : '', hint ? hintId : ''].filter(Boolean).join(' ') || undefined,
      })}
      {errors?.length > 0 && (
        <ul className="sb-field-error" id={errId}>
          {errors.map((m, i) => (
            <li key={i}>{m}</li>
          ))}
        </ul>
      )}
      {hint && (
        <p className="sb-hint" id={hintId}>
          {hint}
        </p>
      )}
    </div>
  );
}

/** pageHeading is the page's own heading, which names the pipe. */
function pageHeading() {
  return document.querySelector('main h1');
}

/**
 * renewToken takes the session's CSRF token from the server into the
 * page, after a login in another tab replaced the session. It reports
 * whether the session is logged in.
 */
async function renewToken() {
  try {
    const p = await pageInfo(window.location.pathname);
    if (p.loggedIn) setCSRFToken(p.csrf);
    return p.loggedIn;
  } catch {
    return false;
  }
}

export default function App({ initialPipeId }) {
  const uid = useId();
  const [catalogue, setCatalogue] = useState(null);
  const [feeds, setFeeds] = useState([]);
  const [loadError, setLoadError] = useState('');
  const [state, dispatch] = useReducer(reducer, undefined, emptyState);
  const [pipeId, setPipeId] = useState(initialPipeId || '');
  const [selected, setSelected] = useState('');
  const [slugTouched, setSlugTouched] = useState(false);
  const [live, setLive] = useState(true);
  const [preview, setPreview] = useState(null);
  const [previewErr, setPreviewErr] = useState(null);
  const [saveErr, setSaveErr] = useState(null);
  const [saved, setSaved] = useState(null);
  const [busy, setBusy] = useState('');
  const [status, setStatus] = useState('Loading the operator catalogue…');
  // The text of the feed box being typed in (null before the first).
  const [feedQuery, setFeedQuery] = useState(null);
  // The semantic key of the pipe as loaded or last saved: the builder
  // holds unsaved changes while its key differs.
  const [savedKey, setSavedKey] = useState(() => semanticKey(emptyState()));
  // A change was refused for want of a login: the page stays, with its
  // pipe, until a login in another tab lets a save through.
  const [expired, setExpired] = useState(false);
  const previewSeq = useRef(0);
  const previewAbort = useRef(null);
  // A preview asked for with the button reports its result in the status
  // line, also when a live preview replaced it while it ran.
  const previewAsked = useRef(false);
  const nodesHeading = useRef(null);
  const workspace = useRef(null);
  const alertRef = useRef(null);
  const feedsRef = useRef(null);
  useFillViewport(workspace, catalogue !== null);

  const operators = catalogue?.operators || [];
  const byName = useMemo(() => new Map(operators.map((o) => [o.name, o])), [operators]);
  const feedOptions = useMemo(() => sourceOptions(feeds), [feeds]);
  const key = semanticKey(state);
  const clientProblems = useMemo(() => (catalogue ? problems(state, operators) : []), [key, catalogue]); // eslint-disable-line react-hooks/exhaustive-deps
  const dirty = catalogue !== null && key !== savedKey;
  const outId = outputNode(state);
  const sinkIds = sinks(state);

  // Load the catalogue, the feeds and the pipe being edited.
  useEffect(() => {
    let alive = true;
    (async () => {
      try {
        const [cat, info] = await Promise.all([
          api('/api/v1/operators'),
          initialPipeId ? api(`/api/v1/pipes/${encodeURIComponent(initialPipeId)}`).catch((e) => ({ failed: e })) : null,
        ]);
        if (!alive) return;
        setCatalogue({ operators: Array.isArray(cat?.operators) ? cat.operators : [], triggers: cat?.triggers || TRIGGERS });
        if (info?.failed) {
          setLoadError(`Pipe ${initialPipeId} could not be loaded: ${info.failed.message}. Saving makes a new pipe.`);
          setPipeId('');
          setStatus('');
        } else if (info) {
          const s = fromPipe(info.pipe);
          dispatch({ type: 'load', state: s });
          setSavedKey(semanticKey(s));
          setSlugTouched(true);
          // The page lists a saved pipe's feed URLs itself; they show here after a save.
          setSelected(s.nodes[0]?.id || '');
          // Named as the page's heading names it: as plain text.
          const name = pageHeading()?.textContent?.trim() || '';
          setStatus(`Editing pipe ${info.id}${name ? `, ${name}` : ''}.`);
        } else {
          setStatus('');
        }
      } catch (e) {
        if (alive) {
          setLoadError(`The chain builder could not load: ${e.message}`);
          setStatus('');
        }
      }
    })();
    return () => {
      alive = false;
    };
  }, [initialPipeId]);

  const runPreview = useCallback(
    async (why) => {
      const body = toPipe(state);
      if (!body.output.slug) body.output.slug = 'preview';
      previewAbort.current?.abort();
      const ctl = new AbortController();
      previewAbort.current = ctl;
      const seq = ++previewSeq.current;
      if (why === 'button') previewAsked.current = true;
      setBusy((b) => b || 'preview');
      try {
        const pv = await api(pipeId ? `/api/v1/pipes/${encodeURIComponent(pipeId)}/preview` : '/api/v1/pipes/preview', {
          method: 'POST',
          body,
          signal: ctl.signal,
          stay: true,
        });
        if (seq !== previewSeq.current) return;
        setExpired(false);
        const ix = indexPreview(pv);
        setPreview(ix);
        setPreviewErr(null);
        if (previewAsked.current) {
          previewAsked.current = false;
          setStatus(`Preview: ${Object.keys(ix.nodes).length} nodes ran, ${ix.output.length} items out${ix.error ? `; ${ix.error}` : ''}.`);
        }
      } catch (e) {
        if (e?.name === 'AbortError' || seq !== previewSeq.current) return;
        previewAsked.current = false;
        if (e?.status === 401) setExpired(true);
        setPreviewErr(errorState(e, body));
        setPreview(null);
      } finally {
        if (seq === previewSeq.current) setBusy((b) => (b === 'preview' ? '' : b));
      }
    },
    [state, pipeId],
  );

  // Live preview: after each change of meaning, once the definition compiles.
  useEffect(() => {
    setSaveErr(null);
    if (!live || !catalogue || state.nodes.length === 0 || clientProblems.length > 0) return undefined;
    const t = setTimeout(() => runPreview('live'), LIVE_DELAY_MS);
    return () => clearTimeout(t);
  }, [key, live, catalogue]); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => () => previewAbort.current?.abort(), []);

  // Leaving the page (a link, a reload, closing it) asks first while the
  // builder holds unsaved changes.
  useEffect(() => {
    if (!dirty) return undefined;
    const ask = (e) => {
      e.preventDefault();
      e.returnValue = '';
    };
    window.addEventListener('beforeunload', ask);
    return () => window.removeEventListener('beforeunload', ask);
  }, [dirty]);

  // The page's note on the mdpt trigger shows while the trigger is mdpt.
  useEffect(() => {
    const note = document.getElementById('trigger-note');
    if (note) note.hidden = state.trigger.on !== 'mdpt';
  }, [state.trigger.on]);

  // Suggestions for the feed box being typed in: a search, not every feed.
  useEffect(() => {
    if (feedQuery === null) return undefined;
    const ctl = new AbortController();
    const t = setTimeout(async () => {
      try {
        const found = await searchFeeds(feedQuery, { get: (path, o) => api(path, { ...o, stay: true }), signal: ctl.signal });
        if (!ctl.signal.aborted) setFeeds(found);
      } catch {
        // Suggestions are a help: without them the box still takes any reference.
      }
    }, SEARCH_DELAY_MS);
    return () => {
      clearTimeout(t);
      ctl.abort();
    };
  }, [feedQuery]);

  const save = async () => {
    const body = toPipe(state);
    const sentKey = key;
    setBusy('save');
    setStatus('Saving…');
    const send = () =>
      api(pipeId ? `/api/v1/pipes/${encodeURIComponent(pipeId)}` : '/api/v1/pipes', { method: pipeId ? 'PUT' : 'POST', body, stay: true });
    try {
      let info;
      try {
        // After a 401, the login made in another tab is a new session
        // with its own CSRF token: take it from the server first.
        if (expired) await renewToken();
        info = await send();
      } catch (e) {
        // A login elsewhere since the page loaded: the same, once.
        if (!(e?.status === 403 && /csrf/i.test(e.message)) || !(await renewToken())) throw e;
        info = await send();
      }
      setSaved(info);
      setSaveErr(null);
      setPreviewErr(null);
      setLoadError('');
      setExpired(false);
      setSavedKey(sentKey);
      if (info?.id) {
        setPipeId(String(info.id));
        window.history.replaceState(window.history.state, '', `/ui/pipes/${info.id}`);
        // The page's heading was rendered before the save: name the saved
        // pipe as the server's page does (as plain text).
        pageInfo(`/ui/pipes/${info.id}`)
          .then((p) => {
            const h1 = pageHeading();
            if (h1 && p.heading) h1.textContent = p.heading;
          })
          .catch(() => {});
      }
      setStatus(`Saved pipe ${info?.id ?? ''}: its feed URLs are under “Republished feeds”.`);
    } catch (e) {
      if (e?.status === 401) setExpired(true);
      setSaveErr(errorState(e, body));
      setStatus('');
    } finally {
      setBusy('');
    }
  };

  // addOperator adds a node of operator name and selects it: where it was
  // dropped (at), else a source down the first column and any other node
  // right of the selected one, fed by it.
  const addOperator = (name, at) => {
    const info = byName.get(name);
    if (!info) return;
    const action = { type: 'addNode', op: name, config: {} };
    const after = state.nodes.find((n) => n.id === selected);
    if (at) action.at = at;
    else if (info.max_inputs === 0) action.near = { x: -COLUMN, y: 0 };
    else if (after) {
      action.near = after;
      action.from = after.id;
    }
    const before = new Set(state.nodes.map((n) => n.id));
    const next = reducer(state, action);
    const added = next.nodes.find((n) => !before.has(n.id));
    dispatch({ type: 'load', state: next });
    if (added) {
      setSelected(added.id);
      setStatus(`Added node ${added.id}${action.from ? `, fed by ${action.from}` : ''}.`);
    }
  };

  const removeNode = useCallback(
    (id) => {
      dispatch({ type: 'removeNode', id });
      const rest = state.nodes.filter((n) => n.id !== id);
      if (selected === id || !rest.some((n) => n.id === selected)) setSelected(rest.length ? rest[rest.length - 1].id : '');
      setStatus(`Deleted node ${id}.`);
    },
    [state.nodes, selected],
  );

  // "Delete node" removes its own button: the focus goes to the node list.
  const removeSelected = useCallback(
    (id) => {
      removeNode(id);
      nodesHeading.current?.focus();
    },
    [removeNode],
  );

  const panelDispatch = useCallback(
    (a) => {
      if (a.type === 'removeNode') removeSelected(a.id);
      else dispatch(a);
    },
    [removeSelected],
  );

  // A 401 is said once, by the session message.
  const err = [saveErr, previewErr].find((e) => e && e.status !== 401) || null;
  // What a save brings, its errors or its feed URLs, is scrolled into view.
  useEffect(() => {
    if (saveErr) alertRef.current?.scrollIntoView({ block: 'nearest' });
  }, [saveErr]);
  useEffect(() => {
    if (saved?.feeds) feedsRef.current?.scrollIntoView({ block: 'nearest' });
  }, [saved]);
  const errs = useMemo(() => errorMap(err?.details, err?.pipe), [err]);
  const pipeErr = (f) => errs.pipe[f];
  const node = state.nodes.find((n) => n.id === selected);
  const nodeProblems = clientProblems.filter((p) => p.node && p.node === selected).map((p) => (p.field ? `${p.field}: ${p.error}` : p.error));
  const feedList = `${uid}-feeds`;

  if (!catalogue) {
    return (
      <div className="sb-app">
        <p role="status">{status}</p>
        {loadError && (
          <div role="alert" className="sb-alert">
            {loadError}
          </div>
        )}
      </div>
    );
  }

  return (
    <div
      className="sb-app"
      onFocus={(e) => {
        if (e.target?.getAttribute?.('list') === feedList) setFeedQuery(e.target.value);
      }}
      onInput={(e) => {
        if (e.target?.getAttribute?.('list') === feedList) setFeedQuery(e.target.value);
      }}
    >
      <datalist id={feedList}>
        {feedOptions.map((f) => (
          <option key={f.ref} value={f.ref}>
            {f.label}
          </option>
        ))}
      </datalist>

      <section className="sb-head" aria-label="Pipe">
        <Field label="Name" id={`${uid}-name`} errors={pipeErr('name')}>
          {(p) => (
            <input
              {...p}
              type="text"
              value={state.name}
              autoComplete="off"
              onChange={(e) => {
                dispatch({ type: 'meta', field: 'name', value: e.target.value });
                if (!slugTouched) dispatch({ type: 'meta', field: 'slug', value: slugify(e.target.value) });
              }}
            />
          )}
        </Field>
        <Field label="Slug" id={`${uid}-slug`} errors={pipeErr('output.slug')} hint={`the feeds' name: /feeds/${state.slug || 'SLUG'}.rss`}>
          {(p) => (
            <input
              {...p}
              type="text"
              value={state.slug}
              autoComplete="off"
              spellCheck={false}
              onChange={(e) => {
                setSlugTouched(true);
                dispatch({ type: 'meta', field: 'slug', value: e.target.value });
              }}
            />
          )}
        </Field>
        <Field label="Feed title" id={`${uid}-title`} errors={pipeErr('output.title')} className="sb-head-title">
          {(p) => (
            <input
              {...p}
              type="text"
              value={state.title}
              placeholder={state.name || 'default: the slug'}
              autoComplete="off"
              onChange={(e) => dispatch({ type: 'meta', field: 'title', value: e.target.value })}
            />
          )}
        </Field>
      </section>

      <div className="sb-main" ref={workspace}>
        <Palette operators={operators} onAdd={(name) => addOperator(name)} />

        <div className="sb-stage">
          <Canvas
            state={state}
            operators={operators}
            selected={selected}
            onSelect={setSelected}
            onRemove={removeNode}
            onDropOperator={addOperator}
            dispatch={dispatch}
            counts={preview?.counts || {}}
            errs={errs.nodes}
            outputId={outId}
          />
        </div>

        <div className="sb-side">
          <div className="sb-side-scroll" role="region" aria-label="Node panel">
            <div role="alert" ref={alertRef} className={err || loadError || expired ? 'sb-alert' : 'sb-alert-empty'}>
              {loadError && <p>{loadError}</p>}
              {expired && (
                <p>
                  Your session has expired:{' '}
                  <a href={loginURL(window.location)} target="_blank" rel="noopener">
                    log in again in another tab
                  </a>
                  , then save.
                </p>
              )}
              {err && (
                <>
                  <p>
                    {err === saveErr ? 'Not saved: ' : 'Preview failed: '}
                    {errs.list.length === 0 ? err.message : `${errs.list.length} problem${errs.list.length === 1 ? '' : 's'}.`}
                  </p>
                  {errs.list.length > 0 && (
                    <ul>
                      {errs.list.map((d, i) => (
                        <li key={i}>
                          {d.node && state.nodes.some((n) => n.id === d.node) ? (
                            <button type="button" className="sb-link" onClick={() => setSelected(d.node)}>
                              {d.text}
                            </button>
                          ) : (
                            d.text
                          )}
                        </li>
                      ))}
                    </ul>
                  )}
                </>
              )}
            </div>

            <div ref={feedsRef}>{saved?.feeds && <FeedLinks feeds={saved.feeds} origin={window.location.origin} />}</div>

            <section className="sb-section" aria-labelledby={`${uid}-nodes-h`}>
              <h2 id={`${uid}-nodes-h`} ref={nodesHeading} tabIndex={-1}>
                Nodes
              </h2>
              {(pipeErr('nodes') || pipeErr('edges')) && (
                <ul className="sb-field-error">
                  {[...(pipeErr('nodes') || []), ...(pipeErr('edges') || [])].map((m, i) => (
                    <li key={i}>{m}</li>
                  ))}
                </ul>
              )}
              {state.nodes.length === 0 ? (
                <p className="sb-hint">No nodes yet: click an operator in the palette, or drag it onto the canvas. Start with a source.</p>
              ) : (
                <ul className="sb-node-list" aria-label="Nodes">
                  {state.nodes.map((n) => {
                    const e = errs.nodes[n.id];
                    return (
                      <li key={n.key}>
                        <button type="button" aria-pressed={n.id === selected} onClick={() => setSelected(n.id)}>
                          {n.id}
                        </button>
                        <span className="sb-op-name">{n.op}</span>
                        {preview?.counts[n.id] !== undefined && <span className="sb-badge sb-badge-count">{preview.counts[n.id]} items</span>}
                        {e?.count > 0 && (
                          <span className="sb-badge sb-badge-error">
                            {e.count} error{e.count === 1 ? '' : 's'}
                          </span>
                        )}
                        {n.id === outId && <span className="sb-badge sb-badge-output">output</span>}
                      </li>
                    );
                  })}
                </ul>
              )}
              {live && clientProblems.length > 0 && state.nodes.length > 0 && (
                <div className="sb-hint sb-waiting">
                  <p>The live preview waits until:</p>
                  <ul>
                    {clientProblems.map((p, i) => (
                      <li key={i}>{[p.node && `node ${p.node}`, p.field].filter(Boolean).join(', ') + (p.node || p.field ? ': ' : '') + p.error}</li>
                    ))}
                  </ul>
                </div>
              )}
            </section>

            {node && (
              <NodePanel
                key={node.key}
                node={node}
                state={state}
                info={byName.get(node.op)}
                dispatch={panelDispatch}
                onSelect={setSelected}
                errors={errs.nodes[node.id]}
                output={preview?.nodes[node.id]}
                feedList={feedList}
                clientProblems={nodeProblems}
              />
            )}

            {preview && (
              <section className="sb-section" aria-labelledby={`${uid}-pv-h`}>
                <h2 id={`${uid}-pv-h`}>Pipe output (preview)</h2>
                {preview.error && <p className="sb-field-error">{preview.error}</p>}
                <ItemsTable caption="Items the pipe would republish" items={preview.output} count={preview.output.length} />
              </section>
            )}
          </div>

          <section className="sb-section sb-pipe" aria-labelledby={`${uid}-out-h`}>
            <h2 id={`${uid}-out-h`}>Output and trigger</h2>
            <div className="sb-pipe-fields">
              <Field label="Output from" id={`${uid}-from`} errors={pipeErr('output.from')} hint="the node whose items are republished">
                {(p) => (
                  <select {...p} value={state.outputFrom} onChange={(e) => dispatch({ type: 'outputFrom', id: e.target.value })}>
                    <option value="">{sinkIds.length === 1 ? `the sink node (${sinkIds[0]})` : 'the sink node'}</option>
                    {state.nodes.map((n) => (
                      <option key={n.key} value={n.id}>
                        {n.id}
                      </option>
                    ))}
                  </select>
                )}
              </Field>
              <Field label="Trigger" id={`${uid}-trigger`} errors={pipeErr('trigger.on')} hint={TRIGGER_HELP[state.trigger.on]}>
                {(p) => (
                  <select {...p} value={state.trigger.on} onChange={(e) => dispatch({ type: 'trigger', on: e.target.value })}>
                    {(catalogue.triggers || TRIGGERS).map((t) => (
                      <option key={t} value={t}>
                        {t}
                      </option>
                    ))}
                  </select>
                )}
              </Field>
              {state.trigger.on === 'mdpt' && (
                <Field label="m" id={`${uid}-m`} errors={pipeErr('trigger.m')} hint="inputs with new items that end a round (empty: all of them)">
                  {(p) => (
                    <input
                      {...p}
                      type="number"
                      min={1}
                      step={1}
                      inputMode="numeric"
                      value={state.trigger.m > 0 ? state.trigger.m : ''}
                      onChange={(e) => dispatch({ type: 'trigger', m: e.target.value === '' ? 0 : Number(e.target.value) })}
                    />
                  )}
                </Field>
              )}
              {state.trigger.on === 'cron' && (
                <Field label="Cron" id={`${uid}-cron`} errors={pipeErr('trigger.cron')} hint={'e.g. "*/5 * * * *" or "@every 10m"'}>
                  {(p) => (
                    <input
                      {...p}
                      type="text"
                      value={state.trigger.cron}
                      spellCheck={false}
                      autoComplete="off"
                      onChange={(e) => dispatch({ type: 'trigger', cron: e.target.value })}
                    />
                  )}
                </Field>
              )}
            </div>
            <div className="sb-actions">
              <div className="sb-field sb-check">
                <input id={`${uid}-live`} type="checkbox" checked={live} onChange={(e) => setLive(e.target.checked)} />
                <label htmlFor={`${uid}-live`}>Live preview</label>
              </div>
              <div className="sb-buttons">
                <button type="button" onClick={() => runPreview('button')} disabled={state.nodes.length === 0} aria-busy={busy === 'preview' || undefined}>
                  Preview
                </button>
                <button type="button" className="sb-primary" onClick={save} disabled={busy === 'save'}>
                  Save
                </button>
              </div>
            </div>
            <p role="status" className="sb-status">
              {status}
            </p>
          </section>
        </div>
      </div>
    </div>
  );
}
