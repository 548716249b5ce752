import fc from 'fast-check';

/**
 * Generators the hostile-input suites share: YAML-shaped values mixing random
 * scalars with the words of the format under test, so fuzzing reaches past
 * the first type check.
 */
export function yamlScalar(domainWords: ReadonlyArray<string | number>): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.string({ maxLength: 30 }),
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.constantFrom(...domainWords),
  );
}

/** A scalar, a short list of them, or a small map of them. */
export function yamlValue(scalar: fc.Arbitrary<unknown>, maxListLength: number): fc.Arbitrary<unknown> {
  return fc.oneof(scalar, fc.array(scalar, { maxLength: maxListLength }), fc.dictionary(fc.string({ maxLength: 10 }), scalar, { maxKeys: 3 }));
}
