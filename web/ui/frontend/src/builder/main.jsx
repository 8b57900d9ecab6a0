// The chain builder page: mounts the app in <div id="builder"
// data-pipe-id="…">, the page the Go server renders at /ui/pipes/new and
// /ui/pipes/{id}.
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import '@xyflow/react/dist/style.css';
import './builder.css';
import App from './App.jsx';

function main() {
  const el = document.getElementById('builder');
  if (!el) return;
  const id = (el.dataset.pipeId || '').trim();
  createRoot(el).render(
    <StrictMode>
      <App initialPipeId={/^[1-9][0-9]{0,19}$/.test(id) ? id : ''} />
    </StrictMode>,
  );
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', main);
else main();
