import { describe, expect, it } from 'vitest';
import { Awareness } from 'y-protocols/awareness';
import * as Y from 'yjs';
import { applyMessage, step1Message, updateMessage } from '../../client/yjs-messages.ts';

describe('applying a message from a viewer’s device', () => {
  const target = (doc: Y.Doc, viewer: boolean) => ({
    doc,
    awareness: new Awareness(doc),
    origin: 'test',
    from: '7',
    viewer,
  });
  const textUpdate = (text: string) => {
    const source = new Y.Doc();
    source.getText('t').insert(0, text);
    return Y.encodeStateAsUpdate(source);
  };

  it('ignores its document updates and answers its step 1', () => {
    const doc = new Y.Doc();
    doc.getText('t').insert(0, 'kept');
    expect(applyMessage(updateMessage(textUpdate('from a viewer')), target(doc, true))).toEqual({
      kind: 'ignored',
    });
    expect(doc.getText('t').toString()).toBe('kept');
    const asked = applyMessage(step1Message(new Y.Doc()), target(doc, true));
    expect(asked.kind).toBe('step1');
  });

  it('applies the same update from an editor’s device', () => {
    const doc = new Y.Doc();
    expect(applyMessage(updateMessage(textUpdate('from an editor')), target(doc, false)).kind).toBe(
      'update',
    );
    expect(doc.getText('t').toString()).toBe('from an editor');
  });
});
