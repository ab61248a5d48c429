// The critical path of each modelled step by class (WorkerReport.critical_path), and the what-if
// panel (WorkerReport.whatif): pick findings, read the step the report re-timed with their fixes.
// Every figure is the report's: the panel only picks the precomputed re-timing of the picked set
// (one per subset of whatif.findings, and whatif.combined for all re-timed findings), never a sum.
import { card, cardNotes } from './card';
import { axisTooltip, chart, tooltipNode, valueAxisStyle } from './charts';
import { DEFINITIONS, type Figure } from './definitions';
import { h, replace } from './dom';
import { field, scope, withScope } from './field';
import * as f from './format';
import { CRITICAL_PATH, UI } from './palette';
import type { CriticalPath, WhatIf, WhatIfCase, WhatIfFinding, WorkerReport } from './report_types';

/** A class's figure name in the definitions ('critical_path.host'). */
function classFigure(c: string): Figure | null {
  const name = `critical_path.${c}`;
  return name in DEFINITIONS ? (name as Figure) : null;
}

function classLabel(c: string): string {
  const name = classFigure(c);
  return name ? f.label(name) : c;
}

/** The classes with time on any modelled step, in the report's order. */
function shownClasses(cp: CriticalPath): string[] {
  return cp.classes.filter((c) => (cp.us_per_step[c] ?? 0) > 0);
}

function pathChart(cp: CriticalPath, classes: string[]): HTMLElement {
  const el = h('div', { class: 'chart', testid: 'critical-path-chart' });
  const steps = cp.steps;
  queueMicrotask(() =>
    chart(el, {
      color: classes.map((c) => CRITICAL_PATH[c] ?? UI.muted),
      grid: { left: 64, right: 16, top: 56, bottom: 36 },
      legend: { top: 0, icon: 'roundRect', itemWidth: 12, itemHeight: 10, textStyle: { color: UI.text } },
      xAxis: {
        type: 'category',
        data: steps.map((s) => `#${s.step}`),
        name: 'step',
        nameLocation: 'middle',
        nameGap: 24,
        axisLabel: { color: UI.dim },
      },
      yAxis: { type: 'value', name: 'ms', nameTextStyle: { color: UI.dim }, ...valueAxisStyle() },
      tooltip: {
        ...axisTooltip(),
        formatter: (ps: { dataIndex: number }[]) => {
          const s = steps[ps[0].dataIndex];
          return tooltipNode(
            `Step ${s.step} · ${f.dur(s.dur_us)} · bound by ${classLabel(s.bound).toLowerCase()}`,
            classes
              .filter((c) => (s.us[c] ?? 0) > 0)
              .map((c) => [CRITICAL_PATH[c] ?? UI.muted, classLabel(c), f.dur(s.us[c])]),
          );
        },
      },
      // a class with no time on a step has no bar there ('-'), never a bar at 0
      series: classes.map((c) => ({
        name: classLabel(c),
        type: 'bar',
        stack: 'step',
        barMaxWidth: 56,
        emphasis: { focus: 'series' },
        data: steps.map((s) => (c in s.us ? +(s.us[c] / 1000).toFixed(4) : '-')),
      })),
    }),
  );
  return el;
}

function pathTable(cp: CriticalPath, classes: string[]): HTMLElement {
  return h(
    'table',
    { class: 'grid compact', testid: 'critical-path-table' },
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', null, 'On the critical path'),
        h('th', { class: 'num' }, 'per step'),
        h('th', { class: 'num' }, 'share'),
      ),
    ),
    h(
      'tbody',
      null,
      classes.map((c) => {
        const name = classFigure(c);
        return h(
          'tr',
          { data: { cls: c } },
          h('th', { title: name ? f.definition(name) : '' }, classLabel(c)),
          h('td', { class: 'num', data: field(`critical_path.us_per_step.${c}`) }, f.dur(cp.us_per_step[c])),
          h('td', { class: 'num', data: field(`critical_path.share.${c}`) }, f.pct(cp.share[c])),
        );
      }),
      h(
        'tr',
        { class: 'total' },
        h('th', null, 'Step'),
        h(
          'td',
          { class: 'num', testid: 'critical-path-total', data: field('critical_path.step_us') },
          f.dur(cp.step_us),
        ),
        h('td', { class: 'num' }, f.pct(1)),
      ),
    ),
  );
}

export function criticalPathCard(w: WorkerReport): HTMLElement | null {
  const cp = w.critical_path;
  if (!cp?.steps.length) return null;
  const classes = shownClasses(cp);
  const of = w.steps?.length ?? cp.steps.length;
  return card(
    'Critical path: what each step waits on',
    [
      h(
        'p',
        { class: 'explain', data: scope('critical_path.steps_modelled summary.steps') },
        `Bound by ${classLabel(cp.bound).toLowerCase()} over the ${f.counted(cp.steps_modelled, 'modelled step')}`,
        cp.steps_modelled < of ? ` (of ${of})` : '',
        '.',
      ),
      h('div', { class: 'row two' }, pathChart(cp, classes), pathTable(cp, classes)),
      withScope(
        cardNotes([
          `Edges from the trace: launch call to kernel start ${f.dur(cp.launch_latency_us)}, queued ops ${f.dur(cp.stream_gap_us)} apart (medians); ${f.counted(cp.inferred_waits_per_step, 'wait', f.count(cp.inferred_waits_per_step))} on another stream per step, inferred from timing.`,
        ]),
        'critical_path.launch_latency_us critical_path.stream_gap_us critical_path.inferred_waits_per_step',
      ),
    ],
    {
      testid: 'critical-path',
      help: 'Each step walked back from its end along what held each piece of work: the host, a launch, the stream before it, another stream, a sync. The classes add up to the step.',
    },
  );
}

/** The re-timing of a set of picked findings (bit k: whatif.findings[k]); null for none picked. */
function caseOf(wi: WhatIf, mask: number): WhatIfCase | null {
  return wi.cases.find((c) => c.mask === mask) ?? null;
}

/** One figure of the panel: its label, its value, and under it its definition, on the page
 * (not in a tooltip alone: "Floor" means little until it is read). */
function figureTile(name: Figure, value: string, testid: string, lead?: string): HTMLElement {
  return h(
    'div',
    { class: 'kpi' },
    h('div', { class: 'kpi-label' }, f.label(name)),
    h('div', { class: 'kpi-value', testid }, value),
    h('div', { class: 'kpi-sub' }, lead ? h('div', { class: 'kpi-lead' }, lead) : null, f.definition(name)),
  );
}

function resultNode(wi: WhatIf, picked: WhatIfCase | null, what: string): HTMLElement {
  const step = picked ? picked.step_us : wi.step_us;
  const mfu = picked ? picked.mfu : wi.mfu;
  const unprofiled = picked ? picked.unprofiled_step_us : wi.unprofiled_step_us;
  const gain = picked?.unprofiled_gain_us_per_step ?? null;
  const share = picked?.unprofiled_gain_share ?? null;
  // the figures below are the picked re-timing's (or, with none picked, the panel's own)
  const at = !picked
    ? 'whatif'
    : picked === wi.combined
      ? 'whatif.combined'
      : `whatif.cases.${wi.cases.indexOf(picked)}`;
  // the headline figures first, without the profiler (the findings' gains, the headline MFU's step),
  // then the re-timing of the trace as recorded
  return h(
    'div',
    { data: scope(at) },
    h('p', { class: 'dim small', testid: 'whatif-picked' }, what),
    h(
      'div',
      { class: 'kpis whatif' },
      figureTile('whatif.unprofiled_step_us', f.dur(unprofiled), 'whatif-unprofiled'),
      // nothing picked, nothing re-timed: no gain and no floor to show
      figureTile(
        'whatif.unprofiled_gain_us_per_step',
        picked ? f.dur(gain) : f.NA,
        'whatif-unprofiled-gain',
        picked ? (share === null ? f.NA : `${f.pct(share)} of the step`) : 'pick a fix above',
      ),
      // MFU after is null when unknown (or past 100 %): shown as unknown, never as a figure
      figureTile('whatif.mfu', f.pct(mfu), 'whatif-mfu'),
      figureTile('whatif.step_us', f.dur(step), 'whatif-step'),
      figureTile(
        'whatif.gain_us_per_step',
        picked ? f.dur(picked.gain_us_per_step) : f.NA,
        'whatif-gain',
        picked ? `${f.pct(picked.gain_share)} of the traced step` : undefined,
      ),
      figureTile('whatif.floor_us', picked ? f.dur(picked.floor_us) : f.NA, 'whatif-floor'),
    ),
  );
}

/** A re-timed finding in words: the title of the finding it is (the same id and subject). */
function findingTitle(w: WorkerReport, fd: WhatIfFinding): string {
  const same = w.findings.find((x) => x.id === fd.id && (x.subject ?? null) === (fd.subject ?? null));
  return same?.title ?? fd.change;
}

export function whatIfCard(w: WorkerReport): HTMLElement | null {
  const wi = w.whatif;
  if (!wi?.findings.length) return null;
  const picked = new Set<number>();
  let all = false;
  const out = h('div', { testid: 'whatif-result' });
  const boxes: HTMLInputElement[] = [];
  const update = () => {
    const mask = [...picked].reduce((m, k) => m | (1 << k), 0);
    const n = wi.findings_retimed;
    if (all && wi.combined) replace(out, resultNode(wi, wi.combined, `All ${n} re-timed findings applied together`));
    else if (!mask)
      replace(out, resultNode(wi, null, 'As recorded: pick findings to re-time the step with their fixes'));
    else
      replace(
        out,
        resultNode(
          wi,
          caseOf(wi, mask),
          picked.size === 1 ? 'The fix of 1 finding applied' : `The fixes of ${picked.size} findings applied together`,
        ),
      );
  };
  const allBox = h('input', {
    props: { type: 'checkbox', checked: false },
    data: { finding: '*' },
    on: {
      change: (ev) => {
        all = (ev.target as HTMLInputElement).checked;
        picked.clear();
        if (all)
          boxes.forEach((b, k) => {
            b.checked = true;
            picked.add(k);
          });
        else for (const b of boxes) b.checked = false;
        update();
      },
    },
  });
  const items = wi.findings.map((fd, k) => {
    const box = h('input', {
      props: { type: 'checkbox', checked: false },
      data: { finding: fd.id, index: String(k) },
      on: {
        change: (ev) => {
          if ((ev.target as HTMLInputElement).checked) picked.add(k);
          else picked.delete(k);
          all = false;
          allBox.checked = false;
          update();
        },
      },
    });
    boxes.push(box);
    return h(
      'li',
      null,
      h('label', { title: `${fd.id}${fd.subject ? ` · ${fd.subject}` : ''}` }, box, findingTitle(w, fd)),
      h('div', { class: 'dim small change-text' }, fd.change),
    );
  });
  update();
  const more = wi.findings_retimed > wi.findings.length;
  return card(
    'What-if: the step re-timed with the fixes',
    [
      h(
        'ul',
        { class: 'plain whatif-picks', testid: 'whatif-picks' },
        items,
        wi.combined
          ? h(
              'li',
              null,
              h('label', null, allBox, h('strong', null, `All ${wi.findings_retimed} re-timed findings together`)),
            )
          : null,
      ),
      out,
      withScope(
        cardNotes(
          [
            `Each re-timing is the report's, on the critical-path model of ${f.counted(wi.steps_modelled, 'step')}: fixes picked together are re-timed together, not summed.`,
            more
              ? `The panel combines the ${wi.findings.length} largest of the ${wi.findings_retimed} re-timed findings; "All" applies every one.`
              : '',
          ].filter(Boolean),
        ),
        'whatif.steps_modelled whatif.findings_retimed',
      ),
    ],
    {
      testid: 'whatif',
      help: 'Pick findings: the simulated step time and MFU with their fixes applied together, from the report (one re-timing of each set of fixes).',
    },
  );
}
