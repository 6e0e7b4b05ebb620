/** File chunks through the host's store (Node: reads and writes files). */
export { type ChunkRef, ChunkTransfer, type ChunkTransferOptions } from './chunk-transfer.ts';
export {
  type DownloadedFile,
  downloadFile,
  fetchChunksInto,
  hashFile,
  type PlacedChunk,
  type Resume,
} from './download-file.ts';
export { fileChunks } from './file-chunks.ts';
export { type UploadedFile, uploadFile } from './upload-file.ts';
