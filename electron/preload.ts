// Preload of the dashboard window (sandboxed, context-isolated): exposes only a way to ask the
// main process for the admin token, so the token never appears in a URL.
import { contextBridge, ipcRenderer } from 'electron';

contextBridge.exposeInMainWorld('syncHost', {
  adminToken: (): Promise<string> => ipcRenderer.invoke('sync-host:admin-token') as Promise<string>,
});
