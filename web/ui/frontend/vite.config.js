// Vite builds the two bundles slogfeed's Go pages load: assets/builder.js
// (the chain builder) and assets/feed.js (the feed charts), each with its
// CSS, under fixed names so the Go side can embed them and a rebuild is
// byte-identical.
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  publicDir: false,
  esbuild: {
    jsx: 'automatic',
    legalComments: 'none',
  },
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    target: 'es2022',
    minify: 'esbuild',
    cssCodeSplit: true,
    modulePreload: false,
    sourcemap: false,
    reportCompressedSize: true,
    rollupOptions: {
      input: {
        builder: 'src/builder/main.jsx',
        feed: 'src/feed/main.js',
      },
      output: {
        format: 'es',
        entryFileNames: 'assets/[name].js',
        chunkFileNames: 'assets/chunk-[name].js',
        assetFileNames: 'assets/[name][extname]',
      },
      preserveEntrySignatures: false,
      onwarn(warning, warn) {
        // @xyflow/react marks itself "use client" for React server
        // components; a browser bundle has no use for it.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
  },
  test: {
    include: ['src/**/*.test.js'],
    environment: 'node',
  },
});
