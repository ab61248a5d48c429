// Upload in the tab: drop trace files or an archive anywhere on the tab, or pick them with the
// Upload button. Each archive is an upload of its own; the other files dropped together are one
// upload, which becomes one run under uploads/. The server checks everything again (types, magic
// bytes, the size cap while it reads); the checks here only save sending what it would refuse.
import { type Child, h, ICONS, icon, replace } from './dom';
import * as f from './format';
import type { ErrorBody, RunsBody, UploadCommitted, UploadsStatus } from './types';

const TRACE = /\.json(\.gz)?$/i;
const ARCHIVE = /\.(zip|tar\.gz|tgz)$/i;
const ACCEPT = '.json,.gz,.zip,.tgz';
const DONE_SHOWN_MS = 10000; // a finished upload's row stays this long

interface Job {
  label: string;
  files: File[];
  sent: number;
  total: number;
  state: 'waiting' | 'sending' | 'done' | 'error';
  message: string;
}

const ICON_UPLOAD = 'M5 20h14v-2H5v2zm0-10h4v6h6v-6h4l-7-7-7 7z';

function batchId(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes); // available without a secure context, unlike randomUUID
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** POST one file (its bytes as the body), reporting bytes sent; resolves with status and JSON. */
function post(url: string, body: Blob | null, onSent: (n: number) => void): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', url);
    xhr.setRequestHeader('X-MFU-Upload', '1'); // the server refuses uploads without it (CSRF)
    if (body) xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.upload.onprogress = (ev) => onSent(ev.loaded);
    xhr.onload = () => {
      let json: unknown = null;
      try {
        json = JSON.parse(xhr.responseText);
      } catch {
        json = { error: xhr.responseText.trim().slice(0, 300) || `HTTP ${xhr.status}` };
      }
      resolve({ status: xhr.status, json });
    };
    xhr.onerror = () => resolve({ status: 0, json: { error: 'the connection to the server was lost' } });
    xhr.send(body);
  });
}

function errorOf(json: unknown, status: number): string {
  const e = (json as Partial<ErrorBody> | null)?.error; // tensorboard/bodies.py ErrorBody
  return typeof e === 'string' ? e : `HTTP ${status}`;
}

export class Uploader {
  readonly button: HTMLButtonElement;
  readonly panel = h('div', { class: 'uploads hidden', testid: 'uploads' });
  private readonly input = h('input', {
    props: { type: 'file', multiple: true },
    attrs: { accept: ACCEPT },
    class: 'hidden',
    testid: 'upload-input',
  });
  private readonly overlay = h(
    'div',
    { class: 'drop-overlay hidden', testid: 'drop-overlay' },
    h(
      'div',
      null,
      icon(ICON_UPLOAD, 28),
      h('strong', null, 'Drop to upload'),
      h('span', null, 'trace files or one archive'),
    ),
  );
  private status: UploadsStatus | null = null;
  private jobs: Job[] = [];
  private notice = '';

  /** ``onUploaded`` gets the run an upload became, to show it. */
  constructor(private readonly onUploaded: (run: string) => void) {
    this.button = h(
      'button',
      {
        class: 'iconbtn hidden',
        title: 'Upload trace files or an archive (.json, .json.gz, .zip, .tar.gz), or drop them on the tab',
        testid: 'upload-button',
        on: { click: () => this.input.click() },
      },
      icon(ICON_UPLOAD, 16),
    );
    this.input.addEventListener('change', () => {
      this.add(Array.from(this.input.files ?? []));
      this.input.value = '';
    });
  }

  /** Installs the drop target on the whole tab. */
  attach(root: HTMLElement): void {
    root.append(this.input, this.overlay);
    let depth = 0; // dragenter/leave fire for every child crossed
    const hasFiles = (ev: DragEvent) => Array.from(ev.dataTransfer?.types ?? []).includes('Files');
    document.addEventListener('dragenter', (ev) => {
      if (!hasFiles(ev)) return;
      depth++;
      this.overlay.classList.toggle('hidden', !this.enabled);
    });
    document.addEventListener('dragleave', () => {
      depth = Math.max(0, depth - 1);
      if (!depth) this.overlay.classList.add('hidden');
    });
    document.addEventListener('dragover', (ev) => {
      if (!hasFiles(ev)) return;
      ev.preventDefault(); // else the drop would navigate the frame to the file
      if (ev.dataTransfer) ev.dataTransfer.dropEffect = this.enabled ? 'copy' : 'none';
    });
    document.addEventListener('drop', (ev) => {
      if (!hasFiles(ev)) return;
      ev.preventDefault();
      depth = 0;
      this.overlay.classList.add('hidden');
      if (this.enabled) this.add(Array.from(ev.dataTransfer?.files ?? []));
      else this.say(this.status?.reason ?? 'upload is off on this server');
    });
  }

  get enabled(): boolean {
    return this.status?.enabled === true;
  }

  /** The server's upload settings, from each /runs poll. */
  update(body: RunsBody | null): void {
    this.status = body?.uploads ?? null;
    this.button.classList.toggle('hidden', !this.enabled);
    this.render();
  }

  /** A drop box for the empty tab; nothing when upload is off. */
  emptyHint(): Child {
    if (!this.enabled) return null;
    return h(
      'button',
      { class: 'drop-box', testid: 'drop-box', on: { click: () => this.input.click() } },
      icon(ICON_UPLOAD, 20),
      h('span', null, 'Drop trace files or an archive of a logdir here, or click to pick them.'),
      h('span', { class: 'dim small' }, `Up to ${f.bytes(this.status?.max_bytes ?? 0)} per upload.`),
    );
  }

  private add(files: File[]): void {
    if (!files.length) return;
    const archives = files.filter((x) => ARCHIVE.test(x.name));
    const traces = files.filter((x) => !ARCHIVE.test(x.name) && TRACE.test(x.name));
    const other = files.filter((x) => !ARCHIVE.test(x.name) && !TRACE.test(x.name));
    const batches = [...archives.map((x) => [x]), ...(traces.length ? [traces] : [])];
    if (other.length)
      this.say(`not uploaded: ${other.map((x) => x.name).join(', ')} (takes .json, .json.gz, .zip, .tar.gz, .tgz)`);
    for (const b of batches) {
      const total = b.reduce((a, x) => a + x.size, 0);
      const label = b.length === 1 ? b[0].name : `${b.length} files`;
      const job: Job = { label, files: b, sent: 0, total, state: 'waiting', message: '' };
      if (this.status && total > this.status.max_bytes) {
        job.state = 'error';
        job.message = `${f.bytes(total)} is over the server's cap of ${f.bytes(this.status.max_bytes)} per upload`;
      }
      this.jobs.push(job);
    }
    this.render();
    void this.drain();
  }

  private sending = false;

  /** Sends the waiting uploads one at a time (the server streams each to disk). */
  private async drain(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    try {
      for (let job = this.next(); job; job = this.next()) await this.send(job);
    } finally {
      this.sending = false;
    }
  }

  private next(): Job | undefined {
    return this.jobs.find((j) => j.state === 'waiting');
  }

  private async send(job: Job): Promise<void> {
    job.state = 'sending';
    const batch = batchId();
    let before = 0;
    for (const file of job.files) {
      const url = `./upload?batch=${batch}&name=${encodeURIComponent(file.name)}`;
      const r = await post(url, file, (n) => {
        job.sent = before + n;
        this.render();
      });
      if (r.status !== 200) {
        void post(`./upload_done?batch=${batch}&cancel=1`, null, () => undefined);
        return this.finish(job, 'error', errorOf(r.json, r.status));
      }
      before += file.size;
    }
    const r = await post(`./upload_done?batch=${batch}`, null, () => undefined);
    if (r.status !== 200) return this.finish(job, 'error', errorOf(r.json, r.status));
    const done = r.json as UploadCommitted;
    this.finish(job, 'done', done.state === 'ready' ? `→ ${done.run}` : `→ ${done.run}: ${done.state}`);
    this.onUploaded(done.run);
  }

  private finish(job: Job, state: 'done' | 'error', message: string): void {
    job.state = state;
    job.message = message;
    job.sent = job.total;
    if (state === 'done')
      window.setTimeout(() => {
        this.jobs = this.jobs.filter((j) => j !== job);
        this.render();
      }, DONE_SHOWN_MS);
    this.render();
  }

  private say(text: string): void {
    this.notice = text;
    this.render();
  }

  private render(): void {
    const rows: Child[] = this.jobs.map((j) =>
      h(
        'div',
        { class: `lrow upload-${j.state}`, testid: 'upload-row', data: { state: j.state } },
        j.state === 'error' ? icon(ICONS.error, 12) : j.state === 'done' ? icon(ICONS.check, 12) : null,
        h('span', { class: 'lname may-overflow', title: j.files.map((x) => x.name).join('\n') }, j.label),
        j.state === 'sending' || j.state === 'waiting'
          ? h(
              'span',
              { class: 'progress' },
              h('span', { class: 'bar', style: { width: `${((100 * j.sent) / Math.max(1, j.total)).toFixed(1)}%` } }),
            )
          : null,
        h(
          'span',
          { class: j.state === 'error' ? 'mono' : 'lval', testid: 'upload-message' },
          j.state === 'sending'
            ? `${f.bytes(j.sent)} of ${f.bytes(j.total)}`
            : j.state === 'waiting'
              ? 'waiting'
              : j.message,
        ),
        j.state === 'error' ? this.dismiss(() => (this.jobs = this.jobs.filter((x) => x !== j))) : null,
      ),
    );
    if (this.notice)
      rows.push(
        h(
          'div',
          { class: 'lrow err', testid: 'upload-notice' },
          icon(ICONS.warn, 12),
          this.notice,
          this.dismiss(() => (this.notice = '')),
        ),
      );
    replace(this.panel, rows);
    this.panel.classList.toggle('hidden', !rows.length);
  }

  private dismiss(drop: () => void): HTMLElement {
    return h(
      'button',
      {
        class: 'link small',
        title: 'Dismiss',
        on: {
          click: () => {
            drop();
            this.render();
          },
        },
      },
      'dismiss',
    );
  }
}
