// The pipe drawn as a graph with React Flow: drag from a node's right
// handle to another's left handle to connect them; Delete or Backspace on
// a focused node or edge removes it. Every change goes through the
// builder's reducer; React Flow only keeps what it measures.
import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { ReactFlow, Background, Controls, Handle, Position, applyNodeChanges, useNodesInitialized, useReactFlow } from '@xyflow/react';

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

/**
 * FitOnGrow fits the view to the nodes whenever one is added or removed,
 * once React Flow has measured them.
 */
function FitOnGrow({ count }) {
  const { fitView } = useReactFlow();
  const measured = useNodesInitialized();
  const fitted = useRef(-1);
  useEffect(() => {
    if (!measured || fitted.current === count) return;
    fitted.current = count;
    fitView({ padding: 0.2, maxZoom: 1.2, duration: 200 });
  }, [count, measured, fitView]);
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
export default function Canvas({ state, operators, selected, onSelect, onRemove, dispatch, counts, errs, outputId }) {
  const byName = useMemo(() => new Map(operators.map((o) => [o.name, o])), [operators]);
  const [rfNodes, setRfNodes] = useState([]);
  const [selectedEdge, setSelectedEdge] = useState('');

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

  return (
    <div className="sb-canvas" onKeyDown={onKeyDown}>
      <ReactFlow
        aria-label="Pipe graph"
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
        fitViewOptions={{ padding: 0.2, maxZoom: 1.2 }}
        minZoom={0.2}
        maxZoom={2}
      >
        <Background gap={20} />
        <Controls showInteractive={false} />
        <FitOnGrow count={state.nodes.length} />
      </ReactFlow>
    </div>
  );
}
