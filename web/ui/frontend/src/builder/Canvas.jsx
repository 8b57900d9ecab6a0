// The pipe drawn as a graph with React Flow: drag from a node's right
// handle to another's left handle to connect them; Delete or Backspace on
// a focused node or edge removes it; an operator dragged from the palette
// and dropped here is added where it lands. Every change goes through the
// builder's reducer; React Flow only keeps what it measures.
import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { ReactFlow, Background, Controls, Handle, Position, applyNodeChanges, useNodesInitialized, useReactFlow, useStore } from '@xyflow/react';
import { DRAG_TYPE } from './palette.js';

/** DROP_OFFSET puts a dropped node's top left corner this far up and left of the pointer, about its middle. */
const DROP_OFFSET = { x: 60, y: 24 };

const OpNode = memo(function OpNode({ data, selected }) {
  const cls = ['sb-node'];
  if (selected) cls.push('sb-node-selected');
  if (data.errors > 0) cls.push('sb-node-invalid');
  if (data.output) cls.push('sb-node-output');
  return (
    <div className={cls.join(' ')}>
      {data.takesInput && <Handle type="target" position={Position.Left} aria-label={`inputs of ${data.id}`} />}
      <div className="sb-node-id">{data.id}</div>
      <div className="sb-node-op">{data.op}</div>
      <div className="sb-node-badges">
        {data.count !== undefined && (
          <span className="sb-badge sb-badge-count" title="items in the preview">
            {data.count} item{data.count === 1 ? '' : 's'}
          </span>
        )}
        {data.errors > 0 && (
          <span className="sb-badge sb-badge-error" title={data.errorText}>
            {data.errors} error{data.errors === 1 ? '' : 's'}
          </span>
        )}
        {data.output && <span className="sb-badge sb-badge-output">output</span>}
      </div>
      <Handle type="source" position={Position.Right} aria-label={`output of ${data.id}`} />
    </div>
  );
});

const nodeTypes = { op: OpNode };

const FIT = { padding: 0.2, maxZoom: 1.2 };

/** IN_VIEW_MARGIN is how far (px) inside the canvas's edges a node must be to count as in view. */
const IN_VIEW_MARGIN = 24;

/**
 * FitOnGrow fits the view to the nodes, once React Flow has measured them:
 * when the pipe is first shown; when a node is added or removed while some
 * node is out of sight (a node dropped where the user sees it leaves the
 * view as it is); and when the canvas changes size, unless the user has
 * moved or zoomed the view since it was last fitted and every node is in
 * sight. userMoved is set by the canvas when the user moves the view.
 */
function FitOnGrow({ userMoved }) {
  const { fitView, getNodes, getNodesBounds, getViewport } = useReactFlow();
  // React Flow's own node count: a node added to the pipe counts once it
  // is on the canvas, and useNodesInitialized waits until it is measured.
  const count = useStore((s) => s.nodes.length);
  const width = useStore((s) => s.width);
  const height = useStore((s) => s.height);
  const measured = useNodesInitialized();
  const fitted = useRef(-1);
  const size = useRef('');
  useEffect(() => {
    if (!measured) return;
    const sz = `${width}x${height}`;
    const resized = size.current !== '' && size.current !== sz;
    size.current = sz;
    if (fitted.current === count && !resized) return;
    const first = fitted.current < 0;
    const grew = fitted.current !== count;
    fitted.current = count;
    if (!first && count > 0 && width > 0 && height > 0 && (grew || userMoved.current)) {
      const b = getNodesBounds(getNodes());
      const v = getViewport();
      const left = b.x * v.zoom + v.x;
      const top = b.y * v.zoom + v.y;
      const m = IN_VIEW_MARGIN;
      if (left >= m && top >= m && left + b.width * v.zoom <= width - m && top + b.height * v.zoom <= height - m) return;
    }
    userMoved.current = false;
    fitView({ ...FIT, duration: first || resized ? 0 : 200 });
  }, [count, measured, fitView, getNodes, getNodesBounds, getViewport, width, height, userMoved]);
  return null;
}

function nodeLabel(d) {
  const parts = [`${d.id}, ${d.op}`];
  if (d.count !== undefined) parts.push(`${d.count} items in the preview`);
  if (d.errors > 0) parts.push(`${d.errors} errors`);
  if (d.output) parts.push('republished');
  return parts.join('; ');
}

/**
 * Canvas shows the nodes and edges of state. counts maps node ids to
 * their preview item counts, errs to their error entries (errorMap).
 */
export default function Canvas({ state, operators, selected, onSelect, onRemove, onDropOperator, dispatch, counts, errs, outputId }) {
  const byName = useMemo(() => new Map(operators.map((o) => [o.name, o])), [operators]);
  const [rfNodes, setRfNodes] = useState([]);
  const [selectedEdge, setSelectedEdge] = useState('');
  const [dropping, setDropping] = useState(false);
  const flow = useRef(null);
  const userMoved = useRef(false);

  useEffect(() => {
    setRfNodes((prev) => {
      const old = new Map(prev.map((n) => [n.id, n]));
      return state.nodes.map((n) => {
        const info = byName.get(n.op);
        const e = errs[n.id];
        const data = {
          id: n.id,
          op: n.op,
          takesInput: !info || info.max_inputs !== 0,
          count: counts[n.id],
          errors: e ? e.count : 0,
          errorText: e ? [...e.node, ...Object.entries(e.fields).map(([f, m]) => `${f}: ${m.join('; ')}`)].join('\n') : '',
          output: n.id === outputId,
        };
        const prior = old.get(n.id);
        return {
          ...(prior || {}),
          id: n.id,
          type: 'op',
          position: { x: n.x ?? 0, y: n.y ?? 0 },
          data,
          selected: n.id === selected,
          ariaLabel: nodeLabel(data),
        };
      });
    });
  }, [state.nodes, byName, counts, errs, outputId, selected]);

  const edges = useMemo(
    () =>
      state.edges.map((e) => {
        const id = `${e.from}->${e.to}`;
        return { id, source: e.from, target: e.to, selected: id === selectedEdge, ariaLabel: `edge from ${e.from} to ${e.to}` };
      }),
    [state.edges, selectedEdge],
  );

  const onNodesChange = useCallback(
    (changes) => {
      setRfNodes((ns) => applyNodeChanges(changes, ns));
      for (const c of changes) {
        if (c.type === 'position' && c.position && !c.dragging) dispatch({ type: 'moveNode', id: c.id, x: c.position.x, y: c.position.y });
        else if (c.type === 'remove') dispatch({ type: 'removeNode', id: c.id });
        else if (c.type === 'select' && c.selected) onSelect(c.id);
      }
    },
    [dispatch, onSelect],
  );

  const onEdgesChange = useCallback(
    (changes) => {
      for (const c of changes) {
        const [from, to] = c.id.split('->');
        if (c.type === 'remove') dispatch({ type: 'removeEdge', from, to });
        else if (c.type === 'select') setSelectedEdge(c.selected ? c.id : '');
      }
    },
    [dispatch],
  );

  const onNodeDragStop = useCallback(
    (_, node, nodes) => {
      for (const n of nodes || [node]) dispatch({ type: 'moveNode', id: n.id, x: n.position.x, y: n.position.y });
    },
    [dispatch],
  );

  // Delete and Backspace act on the node or edge that has the focus, not
  // on whatever is selected while the focus is elsewhere on the page
  // (React Flow's own delete key listens to the whole document).
  const onKeyDown = useCallback(
    (e) => {
      if (e.key !== 'Delete' && e.key !== 'Backspace') return;
      const el = e.target instanceof Element ? e.target.closest('.react-flow__node, .react-flow__edge') : null;
      const id = el?.getAttribute('data-id');
      if (!id) return;
      e.preventDefault();
      if (el.classList.contains('react-flow__node')) onRemove(id);
      else {
        const [from, to] = id.split('->');
        dispatch({ type: 'removeEdge', from, to });
      }
    },
    [dispatch, onRemove],
  );

  const onConnect = useCallback((c) => dispatch({ type: 'addEdge', from: c.source, to: c.target }), [dispatch]);

  const isValidConnection = useCallback(
    (c) => c.source !== c.target && !state.edges.some((e) => e.from === c.source && e.to === c.target),
    [state.edges],
  );

  // Operators dragged from the palette: only drags that carry one are
  // taken, so that text or files dropped here do nothing.
  const carriesOperator = (e) => Array.from(e.dataTransfer?.types || []).includes(DRAG_TYPE);
  const onDragOver = useCallback((e) => {
    if (!carriesOperator(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
    setDropping(true);
  }, []);
  const onDragLeave = useCallback((e) => {
    if (!e.currentTarget.contains(e.relatedTarget)) setDropping(false);
  }, []);
  const onDrop = useCallback(
    (e) => {
      setDropping(false);
      if (!carriesOperator(e)) return;
      e.preventDefault();
      const op = e.dataTransfer.getData(DRAG_TYPE);
      if (!byName.has(op) || !flow.current) return;
      const p = flow.current.screenToFlowPosition({ x: e.clientX, y: e.clientY });
      onDropOperator(op, { x: Math.round(p.x - DROP_OFFSET.x), y: Math.round(p.y - DROP_OFFSET.y) });
    },
    [byName, onDropOperator],
  );

  const cls = ['sb-canvas'];
  if (dropping) cls.push('sb-canvas-drop');
  return (
    <div className={cls.join(' ')} onKeyDown={onKeyDown} onDragOver={onDragOver} onDragLeave={onDragLeave} onDrop={onDrop}>
      {state.nodes.length === 0 && (
        <div className="sb-canvas-empty">
          <p>
            Drag an operator here from the palette, or click it there. Start with a <strong>source</strong>: it reads a feed.
          </p>
        </div>
      )}
      <ReactFlow
        aria-label="Pipe graph"
        onInit={(instance) => {
          flow.current = instance;
        }}
        onMoveStart={(event) => {
          // Moves without an event are the view's own (fitView).
          if (event) userMoved.current = true;
        }}
        nodes={rfNodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={onNodesChange}
        onEdgesChange={onEdgesChange}
        onNodeDragStop={onNodeDragStop}
        onConnect={onConnect}
        isValidConnection={isValidConnection}
        deleteKeyCode={null}
        defaultEdgeOptions={{ markerEnd: { type: 'arrowclosed' } }}
        fitView
        fitViewOptions={FIT}
        minZoom={0.2}
        maxZoom={2}
      >
        <Background gap={20} />
        <Controls showInteractive={false} />
        <FitOnGrow userMoved={userMoved} />
      </ReactFlow>
    </div>
  );
}
