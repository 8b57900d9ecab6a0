import { describe, expect, it } from 'vitest';
import catalogue from '../testdata/operators.json';
import { bestMatch, FAMILY_NAMES, inputsText, paletteGroups } from './palette.js';

const ops = catalogue.operators;

function names(groups) {
  return groups.map((g) => [g.family, g.ops.map((o) => o.name)]);
}

describe('paletteGroups', () => {
  it('keeps every operator, grouped as the catalogue groups them, in its order', () => {
    const groups = paletteGroups(ops, '');
    expect(groups.map((g) => g.family)).toEqual(['pipes', 'sensor', 'pack', 'expr']);
    expect(groups.map((g) => g.label)).toEqual(['pipes', 'sensor', 'pack', 'expr'].map((f) => FAMILY_NAMES[f]));
    expect(groups.flatMap((g) => g.ops)).toEqual(ops);
  });

  it.each([
    ['part of a name', 'filt', [['pipes', ['filter']]]],
    ['any case, spaces around', '  MeAn ', [['pack', ['MEAN']]]],
    ['a name of another family', 'sum', [['pack', ['SUM']]]],
    [
      'a letter run in many names',
      'un',
      [
        ['pipes', ['count', 'truncate', 'union', 'unique']],
        ['pack', ['COUNT', 'GUNIQ', 'UNIQ']],
      ],
    ],
    ['nothing', 'zzz', []],
    ['a description word (names only)', 'rolling', []],
  ])('searches by %s', (_, query, want) => {
    expect(names(paletteGroups(ops, query))).toEqual(want);
  });

  it('puts operators without a family last, under their own heading, and skips junk', () => {
    const groups = paletteGroups([{ name: 'b' }, null, { family: 'pipes' }, { name: 'a', family: 'pipes' }], '');
    expect(names(groups)).toEqual([
      ['other', ['b']],
      ['pipes', ['a']],
    ]);
    expect(paletteGroups(undefined, 'x')).toEqual([]);
  });

  it('looks at no more than 64 characters of the search', () => {
    expect(paletteGroups(ops, 'filter' + ' '.repeat(100) + 'x')).toHaveLength(1);
  });
});

describe('bestMatch', () => {
  it.each([
    ['', undefined],
    ['window', 'window'],
    ['win', 'window'],
    ['un', 'union'], // starts with "un", before count, which contains it
    ['ount', 'count'],
    ['sum', 'SUM'],
    ['zzz', undefined],
  ])('%j → %s', (query, want) => {
    expect(bestMatch(ops, query)?.name).toBe(want);
  });
});

describe('inputsText', () => {
  it.each([
    ['source', 'Takes no input.'],
    ['filter', 'Takes 1 input.'],
    ['union', 'Takes 1 or more inputs, in the order they were connected.'],
  ])('%s', (name, want) => {
    expect(inputsText(ops.find((o) => o.name === name))).toBe(want);
  });

  it('counts a range and knows nothing of an unknown operator', () => {
    expect(inputsText({ min_inputs: 2, max_inputs: 2 })).toBe('Takes 2 inputs.');
    expect(inputsText({ min_inputs: 1, max_inputs: 3 })).toBe('Takes 1 to 3 inputs.');
    expect(inputsText(undefined)).toBe('');
    expect(inputsText({ min_inputs: '1', max_inputs: 1 })).toBe('');
  });
});
