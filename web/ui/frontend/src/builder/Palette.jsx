// The operator palette: the catalogue by family, searchable by name. A
// click on an operator (or Enter on it, or Enter in the search box for
// the best match) adds it after the selected node; dragging it onto the
// canvas adds it where it lands. The operators share one Tab stop; the
// arrow keys, Home and End move between them. The description of the
// operator in focus, under the pointer or best matching the search shows
// below the list.
import { useId, useMemo, useRef, useState } from 'react';
import { bestMatch, DRAG_TYPE, FAMILY_NAMES, inputsText, paletteGroups } from './palette.js';

export default function Palette({ operators, onAdd }) {
  const uid = useId();
  const [query, setQuery] = useState('');
  const [collapsed, setCollapsed] = useState(() => new Set());
  const [current, setCurrent] = useState('');
  const [hover, setHover] = useState('');
  const list = useRef(null);
  const search = useRef(null);

  const byName = useMemo(() => new Map(operators.map((o) => [o.name, o])), [operators]);
  const groups = useMemo(() => paletteGroups(operators, query), [operators, query]);
  const searching = query.trim() !== '';
  const open = (family) => searching || !collapsed.has(family);
  const visible = groups.flatMap((g) => (open(g.family) ? g.ops : []));
  const match = bestMatch(operators, query);
  const tabStop = visible.some((o) => o.name === current) ? current : match?.name || visible[0]?.name || '';
  // An operator the list no longer shows (the search changed under the
  // pointer) is not described.
  const shown = [hover, current].map((n) => visible.find((o) => o.name === n)).find(Boolean) || match;

  const focusOp = (name) => {
    setCurrent(name);
    list.current?.querySelector(`[data-op="${CSS.escape(name)}"]`)?.focus();
  };

  const onListKey = (e) => {
    const i = visible.findIndex((o) => o.name === e.target.dataset?.op);
    if (i < 0) return;
    let j;
    if (e.key === 'ArrowDown') j = Math.min(i + 1, visible.length - 1);
    else if (e.key === 'ArrowUp') j = i - 1;
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = visible.length - 1;
    else return;
    e.preventDefault();
    if (j < 0) search.current?.focus();
    else focusOp(visible[j].name);
  };

  const onSearchKey = (e) => {
    if (e.key === 'ArrowDown' && visible.length > 0) {
      e.preventDefault();
      focusOp(match && visible.includes(match) ? match.name : visible[0].name);
    } else if (e.key === 'Enter') {
      e.preventDefault();
      if (match) onAdd(match.name);
    } else if (e.key === 'Escape' && query) {
      e.preventDefault();
      setQuery('');
    }
  };

  const toggle = (family) =>
    setCollapsed((c) => {
      const n = new Set(c);
      if (n.has(family)) n.delete(family);
      else n.add(family);
      return n;
    });

  return (
    <section className="sb-palette" aria-labelledby={`${uid}-h`}>
      <h2 id={`${uid}-h`}>Operators</h2>
      <div className="sb-field sb-palette-search">
        <label htmlFor={`${uid}-q`}>Find by name</label>
        <input
          ref={search}
          id={`${uid}-q`}
          type="search"
          value={query}
          autoComplete="off"
          spellCheck={false}
          maxLength={64}
          placeholder="e.g. filter"
          aria-describedby={`${uid}-qh`}
          onChange={(e) => setQuery(e.target.value)}
          onKeyDown={onSearchKey}
        />
        <span className="sb-hint" id={`${uid}-qh`}>
          Enter adds {match ? <strong>{match.name}</strong> : 'the best match'}.
        </span>
      </div>
      <div className="sb-palette-list" ref={list} onKeyDown={onListKey}>
        {groups.length === 0 && <p className="sb-hint">No operator is called “{query.trim()}”.</p>}
        {groups.map((g) => {
          const listId = `${uid}-g-${g.family}`;
          const isOpen = open(g.family);
          return (
            <div className="sb-palette-group" key={g.family}>
              <h3>
                {searching ? (
                  <span className="sb-palette-family">{g.label}</span>
                ) : (
                  <button type="button" className="sb-palette-family" aria-expanded={isOpen} aria-controls={listId} onClick={() => toggle(g.family)}>
                    {g.label} <span className="sb-op-name">({g.ops.length})</span>
                  </button>
                )}
              </h3>
              {isOpen && (
                <ul id={listId} aria-label={FAMILY_NAMES[g.family] || g.label}>
                  {g.ops.map((o) => (
                    <li key={o.name}>
                      <button
                        type="button"
                        className="sb-palette-op"
                        data-op={o.name}
                        tabIndex={o.name === tabStop ? 0 : -1}
                        aria-describedby={`${uid}-d-${o.name}`}
                        draggable
                        onDragStart={(e) => {
                          e.dataTransfer.setData(DRAG_TYPE, o.name);
                          e.dataTransfer.effectAllowed = 'copy';
                        }}
                        onFocus={() => setCurrent(o.name)}
                        onMouseEnter={() => setHover(o.name)}
                        onMouseLeave={() => setHover('')}
                        onClick={() => {
                          setCurrent(o.name);
                          onAdd(o.name);
                        }}
                      >
                        {o.name}
                      </button>
                      <span hidden id={`${uid}-d-${o.name}`}>
                        {o.doc}
                      </span>
                    </li>
                  ))}
                </ul>
              )}
            </div>
          );
        })}
      </div>
      <div className="sb-palette-doc">
        {shown ? (
          <>
            <p className="sb-palette-doc-name">
              <strong>{shown.name}</strong> <span className="sb-op-name">{FAMILY_NAMES[shown.family] || shown.family}</span>
            </p>
            {shown.doc && <p>{shown.doc}</p>}
            <p className="sb-hint">{inputsText(shown)}</p>
          </>
        ) : (
          <p className="sb-hint">
            Click an operator to add it after the selected node, or drag it onto the canvas to place it. Keys: ↓ from the search box into the list,
            arrows to move, Enter to add.
          </p>
        )}
      </div>
    </section>
  );
}
