/**
 * Source files over 600 lines and functions over 80 lines (declarations, function expressions,
 * arrow functions and methods; first line to last, as an editor shows them), reported as
 * `file:line name: length`, in the folders given (default: every source and test folder for
 * files, every source folder but test/ for functions). Exit code 1 when something is over.
 *
 *   npx tsx scripts/check-sizes.ts [folder...]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const maxFileLines = 600;
const maxFunctionLines = 80;
const sourceFolders = ['server', 'client', 'protocol', 'program', 'electron', 'renderer', 'test'];
const functionFolders = sourceFolders.filter((folder) => folder !== 'test');

function sources(folder: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(folder, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
      found.push(join(entry.parentPath, entry.name));
    }
  }
  return found;
}

function nameOf(node: ts.Node): string {
  const named = node as { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText();
  if (ts.isVariableDeclaration(node.parent)) return node.parent.name.getText();
  if (ts.isPropertyAssignment(node.parent) || ts.isPropertyDeclaration(node.parent))
    return node.parent.name.getText();
  if (ts.isCallExpression(node.parent)) return `(callback of ${node.parent.expression.getText()})`;
  return '(anonymous)';
}

function longFunctions(path: string): string[] {
  const text = readFileSync(path, 'utf8');
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > maxFunctionLines)
        found.push(`${path}:${start + 1} ${nameOf(node)}: ${lines} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

const given = process.argv.slice(2);
const over: string[] = [];
for (const folder of given.length > 0 ? given : sourceFolders) {
  for (const path of sources(folder)) {
    const lines = readFileSync(path, 'utf8').split('\n').length - 1;
    if (lines > maxFileLines) over.push(`${path}: ${lines} lines`);
  }
}
for (const folder of given.length > 0 ? given : functionFolders) {
  for (const path of sources(folder)) over.push(...longFunctions(path));
}
for (const line of over) console.log(line);
process.exitCode = over.length > 0 ? 1 : 0;
