import * as Y from 'yjs';
import { editText } from '../../client/folder/text-merge.ts';

/**
 * Devices that hold `base` in one shared text and each edit it into their version as `sync`
 * sends a save (region by region), none having seen the others' edits yet.
 */
export function editedApart(base: string, versions: string[]): Y.Doc[] {
  const origin = new Y.Doc();
  origin.getText('t').insert(0, base);
  const start = Y.encodeStateAsUpdate(origin);
  return versions.map((version) => {
    const doc = new Y.Doc();
    Y.applyUpdate(doc, start);
    editText(doc.getText('t'), version);
    return doc;
  });
}
