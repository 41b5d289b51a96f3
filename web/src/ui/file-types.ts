// What a file is likely to be, judged by its name (and, for small files without a
// telling name, by its bytes): which files preview as images or text in the page.

/** Text previews show at most this much; bigger text files are offered as downloads. */
export const TEXT_PREVIEW_LIMIT = 1024 * 1024;
/** Images bigger than this are offered as downloads instead of being shown. */
export const IMAGE_PREVIEW_LIMIT = 64 * 1024 * 1024;

const IMAGE_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  bmp: 'image/bmp',
  svg: 'image/svg+xml',
  ico: 'image/x-icon',
};

const TEXT_EXTENSIONS = new Set([
  'txt', 'md', 'markdown', 'rst', 'log', 'csv', 'tsv', 'json', 'jsonl', 'ndjson', 'yaml', 'yml',
  'toml', 'ini', 'cfg', 'conf', 'xml', 'html', 'htm', 'css', 'scss', 'js', 'mjs', 'cjs', 'ts',
  'tsx', 'jsx', 'rs', 'go', 'py', 'rb', 'java', 'kt', 'c', 'h', 'cc', 'cpp', 'hpp', 'cs', 'swift',
  'sh', 'bash', 'zsh', 'fish', 'ps1', 'bat', 'sql', 'lua', 'pl', 'php', 'r', 'tex', 'srt', 'vtt',
  'diff', 'patch', 'env', 'properties', 'gradle', 'lock', 'gitignore', 'dockerignore', 'editorconfig',
]);

const TEXT_NAMES = new Set([
  'readme', 'license', 'licence', 'copying', 'authors', 'changelog', 'makefile', 'dockerfile',
  'cargo.lock', 'procfile', 'gemfile', 'rakefile', 'notice', 'todo',
]);

/** Extensions that are certainly not text: never read them just to sniff. */
const BINARY_EXTENSIONS = new Set([
  'zip', 'gz', 'tgz', 'xz', 'bz2', 'zst', '7z', 'rar', 'tar', 'iso', 'dmg', 'exe', 'dll', 'so',
  'dylib', 'bin', 'dat', 'db', 'sqlite', 'mp3', 'mp4', 'm4a', 'mkv', 'mov', 'avi', 'webm', 'wav',
  'flac', 'ogg', 'pdf', 'doc', 'docx', 'xls', 'xlsx', 'ppt', 'pptx', 'odt', 'heic', 'tif', 'tiff',
  'psd', 'raw', 'cr2', 'nef', 'wasm', 'o', 'a', 'class', 'jar', 'pyc',
]);

/** Audio and video the page plays (streamed with seeking through the service worker). */
const MEDIA_TYPES: Record<string, { mime: string; element: 'video' | 'audio' }> = {
  mp4: { mime: 'video/mp4', element: 'video' },
  m4v: { mime: 'video/mp4', element: 'video' },
  mov: { mime: 'video/quicktime', element: 'video' },
  webm: { mime: 'video/webm', element: 'video' },
  mkv: { mime: 'video/x-matroska', element: 'video' },
  ogv: { mime: 'video/ogg', element: 'video' },
  mp3: { mime: 'audio/mpeg', element: 'audio' },
  m4a: { mime: 'audio/mp4', element: 'audio' },
  aac: { mime: 'audio/aac', element: 'audio' },
  flac: { mime: 'audio/flac', element: 'audio' },
  wav: { mime: 'audio/wav', element: 'audio' },
  ogg: { mime: 'audio/ogg', element: 'audio' },
  oga: { mime: 'audio/ogg', element: 'audio' },
  opus: { mime: 'audio/ogg', element: 'audio' },
};

export type PreviewKind =
  /** An image the browser can show: `mime` is its type. */
  | { kind: 'image'; mime: string }
  /** Audio or video, played as it streams. */
  | { kind: 'media'; mime: string; element: 'video' | 'audio' }
  /** A PDF, opened in the browser's viewer. */
  | { kind: 'pdf' }
  /** Text by its name. */
  | { kind: 'text' }
  /** Small and unknown: read it and look at the bytes. */
  | { kind: 'sniff' }
  /** Nothing to show in the page: download it. */
  | { kind: 'none' };

export function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot <= 0 ? '' : name.slice(dot + 1).toLowerCase();
}

/** How a file of this name and size should open when clicked. */
export function previewKindOf(name: string, size: number): PreviewKind {
  const ext = extensionOf(name);
  const image = IMAGE_TYPES[ext];
  if (image !== undefined) return size <= IMAGE_PREVIEW_LIMIT ? { kind: 'image', mime: image } : { kind: 'none' };
  const media = MEDIA_TYPES[ext];
  if (media !== undefined) return { kind: 'media', ...media };
  if (ext === 'pdf') return { kind: 'pdf' };
  if (TEXT_EXTENSIONS.has(ext) || TEXT_NAMES.has(name.toLowerCase())) return { kind: 'text' };
  if (BINARY_EXTENSIONS.has(ext)) return { kind: 'none' };
  return size <= TEXT_PREVIEW_LIMIT ? { kind: 'sniff' } : { kind: 'none' };
}

/**
 * Decodes bytes as UTF-8 text, or returns null if they do not look like text
 * (invalid UTF-8, or NUL bytes, which text files do not contain).
 */
export function decodeText(bytes: Uint8Array): string | null {
  if (bytes.subarray(0, 8192).includes(0)) return null;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** What a grid tile can show of a file: a thumbnail of an image, a video's poster, or its icon. */
export function thumbnailKindOf(name: string, size: number): 'image' | 'video' | null {
  const kind = previewKindOf(name, size);
  if (kind.kind === 'image') return kind.mime === 'image/svg+xml' ? null : 'image';
  if (kind.kind === 'media' && kind.element === 'video') return 'video';
  return null;
}

/** Whether a folder whose first entries are `rows` is mostly photos and videos (it opens as a grid). */
export function mostlyPictures(rows: { name: string; size: number; kind: string }[]): boolean {
  if (rows.length === 0) return false;
  let pictures = 0;
  for (const row of rows) if (row.kind === 'file' && thumbnailKindOf(row.name, row.size) !== null) pictures += 1;
  return pictures / rows.length >= 0.6;
}
