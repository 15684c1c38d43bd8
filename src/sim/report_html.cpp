// The HTML report: one file of inline SVG drawn here, no script and no external resource
// (a Content-Security-Policy forbids them), so that it opens offline and reads the same
// in every browser. docs/report.md explains each chart and the limits below.
#include "sim/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "sim/csv.h"

namespace aegis {

namespace {


// Limits that keep a report of a production trace (tens of thousands of jobs on hundreds
// of GPUs, 8 policies) a few MB; finer detail than this is below a pixel anyway.
constexpr std::size_t kCdfPoints = 500;
constexpr std::size_t kStepPoints = 2000;
constexpr std::size_t kTimelineGpus = 64;
constexpr std::size_t kTimelineBars = 20000;   // per policy
constexpr std::size_t kReportBars = 100000;    // over the whole report, shared by its timelines
constexpr std::size_t kPerGpuMemoryCharts = 16;
constexpr int kWide = 1160;  // width of full-width charts, px
constexpr int kSmall = 376;  // width of the per-GPU memory charts

constexpr const char* kPolicyColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                          "#edc948", "#9c755f", "#ff9da7", "#e15759", "#bab0ac"};
constexpr std::size_t kJobColours = 8;  // pastel classes .j0 ... .j7 in the style sheet

constexpr std::string_view kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;
max-width:1200px;margin:20px auto;padding:0 16px}
h1{font-size:26px;margin-bottom:4px}h2{font-size:21px;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:44px}
h3{font-size:16px;margin:26px 0 6px}svg.chart{display:block;max-width:100%;height:auto;font-size:12px;background:#fff}
svg text{fill:#333;font-family:inherit}.grid{stroke:#e4e4e4}.axis{stroke:#777;fill:none}
.ref{stroke:#555;stroke-dasharray:4 3}.line{fill:none;stroke-width:1.6;stroke-linejoin:round}
.cap-line{stroke:#222;stroke-width:1.4;stroke-dasharray:6 3}.row{fill:#f7f7f7}.j0{fill:#a0cbe8}.j1{fill:#ffbe7d}
.j2{fill:#8cd17d}.j3{fill:#d4a6c8}.j4{fill:#86bcb6}.j5{fill:#f1ce63}.j6{fill:#d7b5a6}.j7{fill:#b6b6e0}
.timeline rect{stroke:#fff;stroke-width:0.4}.timeline rect.row{stroke:none}
.timeline rect.oom{stroke:#d00;stroke-width:1.4}.timeline rect.stopped{stroke:#444;stroke-dasharray:2 2}
path.x{stroke:#d00;stroke-width:1.6;fill:none}.legend{margin:6px 0 10px}
.legend span{display:inline-block;margin-right:16px;white-space:nowrap}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:5px}
.caption{color:#555;font-size:13px;margin:4px 0 16px}.small{display:flex;flex-wrap:wrap;gap:10px}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:3px 7px;border-bottom:1px solid #e6e6e6;text-align:right}th{background:#f3f3f3;vertical-align:bottom}
td{white-space:nowrap}th:first-child,td:first-child{text-align:left}details{margin:8px 0}
summary{cursor:pointer;font-weight:600;padding:3px 0}
pre{background:#f6f6f6;padding:10px;overflow:auto;font-size:12px;max-height:600px}
)";

// ---- text -----------------------------------------------------------------------------

template <typename... A>
void put(std::string& out, fmt::format_string<A...> f, A&&... args) {
  fmt::format_to(std::back_inserter(out), f, std::forward<A>(args)...);
}


// Three significant digits reads well on bars, ticks and tooltips alike.
std::string sig3(double v) {
  const double a = std::abs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

// Pixels to a tenth without a trailing ".0": a big timeline is mostly these numbers.
std::string px(double v) {
  std::string s = fmt::format("{:.1f}", v + 0.0);
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

struct TimeUnit {
  double seconds;
  const char* name;
};

// Seconds stay readable up to a few units of the next one: 150 s, 90 min, 40 h, 12 days.
TimeUnit time_unit(Seconds span) {
  if (span <= 180) return {1, "s"};
  if (span <= 3 * 3600) return {60, "min"};
  if (span <= 3 * 86400) return {3600, "h"};
  return {86400, "days"};
}

std::string duration(Seconds s) {
  const TimeUnit u = time_unit(std::abs(s));
  return sig3(s / u.seconds) + " " + u.name;
}

// ---- scales, ticks and axes -----------------------------------------------------------

struct Tick {
  double v;
  std::string label;
};

struct Scale {
  double d0 = 0, d1 = 1;  // data domain
  double p0 = 0, p1 = 1;  // pixels
  bool log = false;
  double operator()(double v) const {
    const auto f = [this](double x) { return log ? std::log10(std::max(x, d0)) : x; };
    const double lo = f(d0), hi = f(d1);
    return hi > lo ? p0 + (f(v) - lo) / (hi - lo) * (p1 - p0) : p0;
  }
};

struct Plot {
  int width, height;
  Scale x, y;
};

constexpr int kLeft = 68, kRight = 18, kTop = 14, kBottom = 46;

// Steps drawn per line of a chart `width` wide: more than two a pixel cannot be seen.
std::size_t step_points(int width) {
  return std::min(kStepPoints, static_cast<std::size_t>(2 * (width - kLeft - kRight)));
}

Plot make_plot(int width, int height, Scale x, Scale y) {
  x.p0 = kLeft;
  x.p1 = width - kRight;
  y.p0 = height - kBottom;
  y.p1 = kTop;
  return {width, height, x, y};
}

// About `target` ticks at 1, 2 or 5 times a power of ten, labelled in units of `div`.
std::vector<Tick> linear_ticks(double lo, double hi, double div = 1, bool integer = false, int target = 6) {
  const double a = lo / div, b = hi / div;
  if (!(b > a)) return {{lo, sig3(a)}};
  const double raw = (b - a) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  if (integer) step = std::max(step, 1.0);
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  std::vector<Tick> ticks;
  for (double k = std::ceil(a / step - 1e-9); k * step <= b + step * 1e-9; ++k)
    ticks.push_back({k * step * div, fmt::format("{:.{}f}", k * step + 0.0, decimals)});  // + 0.0: no "-0"
  return ticks;
}

std::vector<Tick> log_time_ticks(double lo, double hi) {
  static const std::pair<double, const char*> marks[] = {
      {1, "1 s"},     {10, "10 s"},      {60, "1 min"},       {600, "10 min"},       {3600, "1 h"},
      {21600, "6 h"}, {86400, "1 day"}, {864000, "10 days"}, {8640000, "100 days"}};
  std::vector<Tick> ticks;
  for (const auto& [v, label] : marks)
    if (v >= lo && v <= hi) ticks.push_back({v, label});
  return ticks;
}

void open_svg(std::string& o, std::string_view kind, int width, int height, std::string_view label) {
  put(o, R"(<svg class="chart {}" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)", kind,
      width, height, width, height, html_escape(label));
}

void axes(std::string& o, const Plot& p, const std::vector<Tick>& xt, const std::vector<Tick>& yt,
          std::string_view xlabel, std::string_view ylabel) {
  const double x0 = p.x.p0, x1 = p.x.p1, y0 = p.y.p0, y1 = p.y.p1;
  for (const auto& t : yt) {
    const double y = p.y(t.v);
    put(o, R"(<line class="grid" x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}"/>)", x0, x1, y, y);
    put(o, R"(<text x="{:.1f}" y="{:.1f}" dy="0.32em" text-anchor="end">{}</text>)", x0 - 6, y, html_escape(t.label));
  }
  for (const auto& t : xt) {
    const double x = p.x(t.v);
    put(o, R"(<line class="axis" x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}"/>)", x, x, y0, y0 + 5);
    put(o, R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", x, y0 + 18, html_escape(t.label));
  }
  put(o, R"(<path class="axis" d="M{:.1f},{:.1f}V{:.1f}H{:.1f}"/>)", x0, y1, y0, x1);
  put(o, R"(<text x="{:.1f}" y="{}" text-anchor="middle">{}</text>)", (x0 + x1) / 2, p.height - 8, html_escape(xlabel));
  put(o, R"~(<text transform="translate(14,{:.1f}) rotate(-90)" text-anchor="middle">{}</text>)~", (y0 + y1) / 2,
      html_escape(ylabel));
}

// ---- series ---------------------------------------------------------------------------

// (time, value) where the value holds until the next time.
using Steps = std::vector<std::pair<double, double>>;

// At most `n` steps over [t0, t1], each bucket keeping the largest value it saw, so that
// peaks survive however much is dropped.
Steps downsample_max(const Steps& s, double t0, double t1, std::size_t n) {
  if (s.size() <= n || !(t1 > t0)) return s;
  const double w = (t1 - t0) / static_cast<double>(n);
  Steps out;
  out.reserve(n);
  std::size_t i = 0;
  double carry = 0;  // the value in force when the bucket starts
  for (std::size_t b = 0; b < n; ++b) {
    const double lo = t0 + w * static_cast<double>(b);
    const double hi = b + 1 == n ? std::numeric_limits<double>::infinity() : lo + w;
    double m = carry;
    for (; i < s.size() && s[i].first < hi; ++i) {
      m = std::max(m, s[i].second);
      carry = s[i].second;
    }
    out.push_back({lo, m});
  }
  return out;
}

double peak(const Steps& s) {
  double m = 0;
  for (const auto& pt : s) m = std::max(m, pt.second);
  return m;
}

// A step line ending at t_end; times relative to the plot's domain origin t0.
void step_path(std::string& o, const Plot& p, const Steps& s, double t0, double t_end, std::string_view colour,
               std::string_view cls, std::string_view tip) {
  if (s.empty()) return;
  put(o, R"(<path class="{}" stroke="{}" d="M{},{})", cls, colour, px(p.x(s[0].first - t0)), px(p.y(s[0].second)));
  for (std::size_t i = 1; i < s.size(); ++i) put(o, "H{}V{}", px(p.x(s[i].first - t0)), px(p.y(s[i].second)));
  put(o, R"(H{}"><title>{}</title></path>)", px(p.x(t_end - t0)), html_escape(tip));
}

// ---- grouping -------------------------------------------------------------------------

struct Palette {
  std::vector<std::string> policies;  // first appearance order over all runs
  std::string_view of(const std::string& policy) const {
    const auto i = static_cast<std::size_t>(std::find(policies.begin(), policies.end(), policy) - policies.begin());
    return kPolicyColours[i % std::size(kPolicyColours)];
  }
};

struct TraceGroup {
  std::string name;
  std::vector<const ReportRun*> runs;
  Seconds t0 = 0, t1 = 0;  // first arrival, last end over its runs
  Seconds span() const { return t1 - t0; }
};

std::vector<TraceGroup> group_by_trace(const std::vector<ReportRun>& runs) {
  std::vector<TraceGroup> groups;
  for (const auto& run : runs) {
    if (!run.result) throw std::invalid_argument("write_html_report: a run without its SimResult");
    const SimResult& r = *run.result;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const TraceGroup& x) { return x.name == r.trace; });
    if (g == groups.end()) {
      groups.push_back({r.trace, {}, r.start, r.end});
      g = groups.end() - 1;
    }
    g->runs.push_back(&run);
    g->t0 = std::min(g->t0, r.start);
    g->t1 = std::max(g->t1, r.end);
  }
  return groups;
}

const ReportRun& baseline(const TraceGroup& g) {
  for (const ReportRun* r : g.runs)
    if (r->result->policy == "exclusive") return *r;
  return *g.runs.front();
}

std::string time_label(const TraceGroup& g, std::string_view what) {
  return fmt::format("{} ({})", what, time_unit(g.span()).name);
}

// ---- chart 1: normalised bars ---------------------------------------------------------

struct Figure {
  const char* name;
  double RunMetrics::*field;
};
constexpr Figure kFigures[] = {
    {"makespan", &RunMetrics::makespan_s}, {"mean JCT", &RunMetrics::jct_mean_s}, {"energy", &RunMetrics::energy_j}};

void bars_chart(std::string& o, const TraceGroup& g, const Palette& pal) {
  const RunMetrics& base = baseline(g).metrics;
  const auto ratio = [&](const RunMetrics& m, const Figure& f) {
    return base.*f.field > 0 ? m.*f.field / (base.*f.field) : std::numeric_limits<double>::quiet_NaN();
  };
  double top = 1;
  for (const ReportRun* r : g.runs)
    for (const auto& f : kFigures)
      if (std::isfinite(ratio(r->metrics, f))) top = std::max(top, ratio(r->metrics, f));
  constexpr int gap = 40;
  const int n = static_cast<int>(g.runs.size());
  const int bar = std::clamp((kWide - kLeft - kRight - 4 * gap) / (3 * n), 12, 44), group = n * bar;
  const int width = std::max(520, kLeft + gap + 3 * (group + gap) + kRight);
  const Plot p = make_plot(width, 320, Scale{0, static_cast<double>(width)}, Scale{0, top * 1.12});
  open_svg(o, "bars", width, p.height, "makespan, mean JCT and energy normalised to " + base.policy);
  axes(o, p, {}, linear_ticks(0, top * 1.12), "", "relative to " + base.policy);
  for (int k = 0; k < 3; ++k) {
    const Figure& f = kFigures[k];
    const double gx = kLeft + gap + k * (group + gap);
    put(o, R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-weight="600">{}</text>)", gx + group / 2.0,
        p.y.p0 + 18, f.name);
    for (int i = 0; i < n; ++i) {
      const RunMetrics& m = g.runs[static_cast<std::size_t>(i)]->metrics;
      const double v = ratio(m, f), x = gx + i * bar, cx = x + bar / 2.0;
      if (!std::isfinite(v)) {
        put(o, R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="10">n/a</text>)", cx, p.y.p0 - 4);
        continue;
      }
      const double y = p.y(v);
      put(o, R"(<rect x="{:.1f}" y="{:.1f}" width="{}" height="{:.1f}" fill="{}">)"
             "<title>{}: {} {:.3f} of {}</title></rect>",
          x + 2, y, bar - 4, p.y.p0 - y, pal.of(m.policy), html_escape(m.policy), f.name, v, html_escape(base.policy));
      put(o, R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" font-size="10">{:.3f}</text>)", cx, y - 4, v);
    }
  }
  put(o, R"(<line class="ref" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"/></svg>)", kLeft, width - kRight, p.y(1),
      p.y(1));
  const std::string how = base.policy == "exclusive"
                              ? std::string("Normalised to exclusive (= 1, dashed line)")
                              : "No exclusive run on this trace: normalised to " + html_escape(base.policy) +
                                    ", the first policy (= 1, dashed line)";
  put(o, R"(<p class="caption">{}: its makespan {}, mean JCT {}, energy {} MJ. Lower is better.</p>)", how,
      duration(base.makespan_s), duration(base.jct_mean_s), sig3(base.energy_j / 1e6));
}

// ---- chart 2: JCT distribution --------------------------------------------------------

std::vector<double> sorted_jcts(const SimResult& r) {
  std::vector<double> v;
  for (const auto& j : r.jobs)
    if (j.completed) v.push_back(j.end - j.submit);
  std::sort(v.begin(), v.end());
  return v;
}

void cdf_chart(std::string& o, const TraceGroup& g, const Palette& pal) {
  std::vector<std::vector<double>> jcts;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const ReportRun* r : g.runs) {
    jcts.push_back(sorted_jcts(*r->result));
    if (jcts.back().empty()) continue;
    lo = std::min(lo, jcts.back().front());
    hi = std::max(hi, jcts.back().back());
  }
  if (hi <= 0) {
    o += R"(<p class="caption">No completed jobs: no JCT distribution.</p>)";
    return;
  }
  // Completion times span decades on production traces; a log axis keeps both ends legible.
  const bool log = lo > 0 && hi / lo >= 100;
  const TimeUnit u = time_unit(hi);
  const Plot p = make_plot(kWide, 340, Scale{log ? lo : 0, hi, 0, 0, log}, Scale{0, 1});
  open_svg(o, "cdf", p.width, p.height, "JCT distribution per policy");
  axes(o, p, log ? log_time_ticks(lo, hi) : linear_ticks(0, hi, u.seconds), linear_ticks(0, 1),
       log ? "job completion time (log scale)" : fmt::format("job completion time ({})", u.name),
       "fraction of completed jobs");
  for (std::size_t k = 0; k < g.runs.size(); ++k) {
    const auto& v = jcts[k];
    if (v.empty()) continue;
    const std::size_t n = std::min(v.size(), kCdfPoints);
    put(o, R"(<path class="line" stroke="{}" d=")", pal.of(g.runs[k]->result->policy));
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t idx = n == 1 ? v.size() - 1 : i * (v.size() - 1) / (n - 1);
      const double fraction = static_cast<double>(idx + 1) / static_cast<double>(v.size());
      put(o, "{}{},{}", i ? "L" : "M", px(p.x(v[idx])), px(p.y(fraction)));
    }
    put(o, R"("><title>{}: {} completed jobs, median {}</title></path>)", html_escape(g.runs[k]->result->policy), v.size(),
        duration(g.runs[k]->metrics.jct_p50_s));
  }
  o += "</svg>";
  put(o, R"(<p class="caption">Empirical CDF of end &minus; submit over completed jobs{}.</p>)",
      log ? ", log time axis" : "");
}

// ---- chart 3: jobs waiting ------------------------------------------------------------

Steps waiting(const SimResult& r) {
  Steps s;
  for (const auto& [t, n] : r.queue_timeline) s.push_back({t, n});
  return s;
}

void queue_chart(std::string& o, const TraceGroup& g, const Palette& pal) {
  std::vector<Steps> lines;
  double top = 1;
  for (const ReportRun* r : g.runs) {
    lines.push_back(downsample_max(waiting(*r->result), g.t0, g.t1, step_points(kWide)));
    top = std::max(top, peak(lines.back()));
  }
  const TimeUnit u = time_unit(g.span());
  const Plot p = make_plot(kWide, 300, Scale{0, g.span()}, Scale{0, top * 1.05});
  open_svg(o, "queue", p.width, p.height, "jobs waiting over time per policy");
  axes(o, p, linear_ticks(0, g.span(), u.seconds), linear_ticks(0, top * 1.05, 1, true),
       time_label(g, "time since first arrival"), "jobs waiting");
  for (std::size_t k = 0; k < g.runs.size(); ++k) {
    const SimResult& r = *g.runs[k]->result;
    step_path(o, p, lines[k], g.t0, r.end, pal.of(r.policy), "line",
              fmt::format("{}: at most {} waiting", r.policy, peak(lines[k])));
  }
  o += "</svg>";
  put(o, R"(<p class="caption">Jobs in the main and recovery queues; at most {} steps per line, each the largest
count in its time bucket so that peaks stay visible.</p>)",
      step_points(kWide));
}

// ---- chart 4: per-GPU timeline --------------------------------------------------------

struct Bar {
  const JobRecord* job;
  const AttemptRecord* attempt;
  std::size_t seq;  // order in the run, with the GPU to break ties the same way every time
  std::size_t gpu;
  std::size_t lane = 0, lanes = 1;
  bool drawn = true;
  Seconds length() const { return attempt->end - attempt->launch; }
  bool oom() const { return attempt->outcome == SimOutcome::Oom; }
};

// Attempts that overlap on a GPU split its row into lanes; each group of overlapping
// attempts gets only the lanes it needs, so that a job alone fills the row.
void assign_lanes(std::vector<Bar>& bars) {
  std::sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) {
    return a.attempt->launch != b.attempt->launch ? a.attempt->launch < b.attempt->launch : a.seq < b.seq;
  });
  for (std::size_t i = 0; i < bars.size();) {
    std::vector<Seconds> lane_end;
    Seconds group_end = bars[i].attempt->end;
    std::size_t j = i;
    for (; j < bars.size() && (j == i || bars[j].attempt->launch < group_end); ++j) {
      const AttemptRecord& a = *bars[j].attempt;
      const auto free = std::find_if(lane_end.begin(), lane_end.end(), [&](Seconds e) { return e <= a.launch; });
      bars[j].lane = static_cast<std::size_t>(free - lane_end.begin());
      if (free == lane_end.end()) lane_end.push_back(a.end);
      else *free = a.end;
      group_end = std::max(group_end, a.end);
    }
    for (std::size_t k = i; k < j; ++k) bars[k].lanes = lane_end.size();
    i = j;
  }
}

std::vector<std::vector<Bar>> bars_per_gpu(const SimResult& r, std::size_t gpus) {
  std::vector<std::vector<Bar>> rows(gpus);
  std::size_t seq = 0;
  for (const auto& j : r.jobs)
    for (const auto& a : j.attempts) {
      for (int id : a.gpus) {
        const auto gpu = static_cast<std::size_t>(id);
        if (id >= 0 && gpu < gpus) rows[gpu].push_back({&j, &a, seq, gpu});
      }
      ++seq;
    }
  for (auto& row : rows) assign_lanes(row);
  return rows;
}

// Bars left out of a timeline, OOM attempts apart: each group loses its shortest.
struct Omitted {
  std::size_t total = 0, other = 0, oom = 0;
  Seconds longest_other = 0, longest_oom = 0;
};

// Marks all but the `keep` longest undrawn; returns the longest left out.
Seconds keep_longest(std::vector<Bar*>& bars, std::size_t keep) {
  if (bars.size() <= keep) return 0;
  const auto longer = [](const Bar* a, const Bar* b) {
    if (a->length() != b->length()) return a->length() > b->length();
    return a->seq != b->seq ? a->seq < b->seq : a->gpu < b->gpu;
  };
  const auto cut = bars.begin() + static_cast<std::ptrdiff_t>(keep);
  std::nth_element(bars.begin(), cut, bars.end(), longer);
  Seconds longest = 0;
  for (auto it = cut; it != bars.end(); ++it) {
    (*it)->drawn = false;
    longest = std::max(longest, (*it)->length());
  }
  return longest;
}

// Above the cap the longest attempts are drawn, as they cover the most pixels (the short
// ones left out are slivers anyway). A quarter of the cap is kept for OOM attempts, so
// that their marks show even among many long jobs, and no more, so that an OOM storm
// does not hide every job that ran.
Omitted limit_bars(std::vector<std::vector<Bar>>& rows, std::size_t cap) {
  std::vector<Bar*> oom, other;
  for (auto& row : rows)
    for (auto& b : row) (b.oom() ? oom : other).push_back(&b);
  Omitted om{oom.size() + other.size()};
  if (om.total <= cap) return om;
  const std::size_t oom_keep = std::min(oom.size(), std::max(cap / 4, cap - std::min(cap, other.size())));
  om.oom = oom.size() - oom_keep;
  om.other = other.size() - (cap - oom_keep);
  om.longest_oom = keep_longest(oom, oom_keep);
  om.longest_other = keep_longest(other, cap - oom_keep);
  return om;
}

std::string omitted_note(const Omitted& om) {
  if (om.oom + om.other == 0) return "";
  std::string parts;
  if (om.other) parts += fmt::format("{} other attempts of at most {} each", om.other, duration(om.longest_other));
  if (om.oom)
    parts += fmt::format("{}{} OOM attempts of at most {} each", parts.empty() ? "" : " and ", om.oom,
                         duration(om.longest_oom));
  return fmt::format(" {} of {} bars are not drawn, to keep the file small: the shortest, {}.", om.oom + om.other,
                     om.total, parts);
}

// Launch and end in the axis' unit; the decimals resolve about a minute even in days.
std::string span_label(const AttemptRecord& a, Seconds t0, const TimeUnit& u) {
  const int decimals = u.seconds >= 86400 ? 3 : u.seconds >= 3600 ? 2 : u.seconds >= 60 ? 1 : 0;
  return fmt::format("{:.{}f} to {:.{}f} {}", (a.launch - t0) / u.seconds, decimals, (a.end - t0) / u.seconds,
                     decimals, u.name);
}

// Every byte here is paid once per bar: the default outcome and the split go unsaid.
void draw_bar(std::string& o, const Plot& p, const Bar& b, Seconds t0, const TimeUnit& u, double row_top,
              double row_h) {
  const AttemptRecord& a = *b.attempt;
  const double x = p.x(a.launch - t0), w = std::max(0.6, p.x(a.end - t0) - x);
  const double lane_h = (row_h - 2) / static_cast<double>(b.lanes);
  const double y = row_top + 1 + lane_h * static_cast<double>(b.lane);
  const bool completed = a.outcome == SimOutcome::Completed;
  put(o, R"(<rect class="j{}{}" x="{}" y="{}" width="{}" height="{}"><title>job {} {}: {}{}</title></rect>)",
      static_cast<std::uint64_t>(b.job->trace_index) % kJobColours,
      b.oom() ? " oom" : completed ? "" : " stopped", px(x), px(y), px(w), px(lane_h), b.job->trace_index,
      html_escape(b.job->workload.str()), span_label(a, t0, u), completed ? "" : b.oom() ? ", OOM" : ", stopped");
  if (!b.oom()) return;
  const double s = std::clamp(lane_h / 2 - 1, 2.0, 4.0), cy = y + lane_h / 2;
  put(o, R"(<path class="x" d="M{},{}l{},{}m0,{}l{},{}"/>)", px(x + w - s), px(cy - s), px(2 * s), px(2 * s),
      px(-2 * s), px(-2 * s), px(2 * s));
}

void timeline_chart(std::string& o, const TraceGroup& g, const SimResult& r, std::size_t bar_cap) {
  const std::size_t gpus = r.gpu_total_mib.size(), shown = std::min(gpus, kTimelineGpus);
  auto rows = bars_per_gpu(r, shown);
  const Omitted om = limit_bars(rows, bar_cap);
  const TimeUnit u = time_unit(g.span());
  const double row_h = shown <= 8 ? 44 : shown <= 24 ? 24 : 14;
  const int height = kTop + static_cast<int>(row_h * static_cast<double>(shown)) + kBottom;
  const Plot p = make_plot(kWide, height, Scale{0, g.span()}, Scale{0, static_cast<double>(shown)});
  open_svg(o, "timeline", p.width, p.height, "per-GPU timeline of " + r.policy);
  axes(o, p, linear_ticks(0, g.span(), u.seconds), {}, time_label(g, "time since first arrival"), "GPU");
  for (std::size_t i = 0; i < shown; ++i) {
    const double top = p.y(static_cast<double>(shown - i));
    if (i % 2)
      put(o, R"(<rect class="row" x="{}" y="{:.1f}" width="{}" height="{:.1f}"/>)", kLeft, top, kWide - kLeft - kRight,
          row_h);
    put(o, R"(<text x="{}" y="{:.1f}" dy="0.32em" text-anchor="end"{}>{}</text>)", kLeft - 6, top + row_h / 2,
        row_h < 20 ? R"( font-size="10")" : "", i);
    for (const Bar& b : rows[i])
      if (b.drawn) draw_bar(o, p, b, g.t0, u, top, row_h);
  }
  o += "</svg>";
  std::string notes;
  if (shown < gpus) notes += fmt::format(" Showing the first {} of {} GPUs.", shown, gpus);
  notes += omitted_note(om);
  put(o, R"(<p class="caption">Rows are GPUs, bars are attempts (colours tell jobs apart); attempts that overlap on a
GPU split its row. Red outline and &times;: died of OOM; dashed outline: stopped. Hover a bar for the job.{}</p>)",
      notes);
}

// ---- chart 5: GPU memory --------------------------------------------------------------

constexpr double kMiBPerGiB = 1024;

Steps memory_steps(const std::vector<GpuPoint>& points) {
  Steps s;
  s.reserve(points.size());
  for (const auto& pt : points) s.push_back({pt.t, static_cast<double>(pt.used_mib) / kMiBPerGiB});
  return s;
}

Steps cluster_memory(const SimResult& r) {
  std::vector<std::pair<Seconds, std::size_t>> changes;  // (time, gpu); a GPU's times are distinct
  for (std::size_t gpu = 0; gpu < r.gpu_timeline.size(); ++gpu)
    for (const auto& pt : r.gpu_timeline[gpu]) changes.push_back({pt.t, gpu});
  std::sort(changes.begin(), changes.end());
  std::vector<std::size_t> next(r.gpu_timeline.size(), 0);
  std::vector<MiB> used(r.gpu_timeline.size(), 0);
  MiB total = 0;
  Steps s;
  for (const auto& [t, gpu] : changes) {
    const MiB now = r.gpu_timeline[gpu][next[gpu]++].used_mib;
    total += now - used[gpu];
    used[gpu] = now;
    const double gib = static_cast<double>(total) / kMiBPerGiB;
    if (!s.empty() && s.back().first == t) s.back().second = gib;
    else s.push_back({t, gib});
  }
  return s;
}

struct Line {
  const SimResult* run;
  Steps steps;
};

void memory_chart(std::string& o, const TraceGroup& g, const Palette& pal, int width, std::string_view name,
                  double capacity_gib, const std::vector<Line>& lines) {
  double top = capacity_gib;
  for (const auto& l : lines) top = std::max(top, peak(l.steps));
  top *= 1.08;
  const Plot p = make_plot(width, width < kWide ? 200 : 300, Scale{0, g.span()}, Scale{0, top});
  open_svg(o, "memory", p.width, p.height, fmt::format("{}: memory in use", name));
  axes(o, p, linear_ticks(0, g.span(), time_unit(g.span()).seconds, false, width < kWide ? 4 : 6),
       linear_ticks(0, top, 1, false, 4), time_label(g, "time"), "GiB in use");
  put(o, R"(<text x="{}" y="11" font-weight="600">{}</text>)", kLeft, html_escape(name));
  const double yc = p.y(capacity_gib);
  put(o, R"(<line class="cap-line" x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}"><title>capacity {} GiB</title></line>)",
      kLeft, width - kRight, yc, yc, sig3(capacity_gib));
  for (const auto& l : lines)
    step_path(o, p, l.steps, g.t0, l.run->end, pal.of(l.run->policy), "line",
              fmt::format("{}: at most {} GiB", l.run->policy, sig3(peak(l.steps))));
  o += "</svg>";
}

// Every policy on one chart of the cluster total: at that scale the lines are smooth
// enough to compare.
void cluster_memory_chart(std::string& o, const TraceGroup& g, const Palette& pal) {
  const SimResult& first = *g.runs.front()->result;
  MiB capacity = 0;
  for (MiB c : first.gpu_total_mib) capacity += c;
  std::vector<Line> lines;
  for (const ReportRun* r : g.runs)
    lines.push_back({r->result, downsample_max(cluster_memory(*r->result), g.t0, g.t1, step_points(kWide))});
  memory_chart(o, g, pal, kWide, fmt::format("all {} GPUs", first.gpu_total_mib.size()),
               static_cast<double>(capacity) / kMiBPerGiB, lines);
}

// One policy per group of small charts: per GPU, several policies' step lines would tangle.
void per_gpu_memory_charts(std::string& o, const TraceGroup& g, const Palette& pal) {
  for (std::size_t k = 0; k < g.runs.size(); ++k) {
    const SimResult& r = *g.runs[k]->result;
    double fullest = 0;
    for (std::size_t gpu = 0; gpu < r.gpu_timeline.size(); ++gpu)
      for (const auto& pt : r.gpu_timeline[gpu])
        fullest = std::max(fullest, static_cast<double>(pt.used_mib) / static_cast<double>(r.gpu_total_mib[gpu]));
    put(o, R"(<details{}><summary>{}: at most {:.0f} % of a GPU's memory in use</summary><div class="small">)",
        k == 0 ? " open" : "", html_escape(r.policy), 100 * fullest);
    for (std::size_t gpu = 0; gpu < r.gpu_timeline.size(); ++gpu)
      memory_chart(o, g, pal, kSmall, fmt::format("GPU {}", gpu),
                   static_cast<double>(r.gpu_total_mib[gpu]) / kMiBPerGiB,
                   {{&r, downsample_max(memory_steps(r.gpu_timeline[gpu]), g.t0, g.t1, step_points(kSmall))}});
    o += "</div></details>";
  }
}

void memory_section(std::string& o, const TraceGroup& g, const Palette& pal) {
  const std::size_t gpus = g.runs.front()->result->gpu_total_mib.size();
  for (const ReportRun* r : g.runs)
    if (r->result->gpu_timeline.size() != gpus || r->result->gpu_total_mib.size() != gpus) {
      o += R"(<p class="caption">GPU memory was not recorded for every policy (simulate with record_timeline).</p>)";
      return;
    }
  const bool per_gpu = gpus <= kPerGpuMemoryCharts;
  if (per_gpu) per_gpu_memory_charts(o, g, pal);
  else cluster_memory_chart(o, g, pal);
  put(o, R"(<p class="caption">Memory the jobs hold (what an OOM is decided on) against capacity (dashed){}; at
most {} steps per line, each the largest value in its time bucket.</p>)",
      per_gpu ? "" : ", summed over the cluster", step_points(per_gpu ? kSmall : kWide));
}

// ---- table, legend, page --------------------------------------------------------------

std::string ratio(double v, double base) { return base > 0 ? fmt::format("{:.3f}", v / base) : "-"; }

void metrics_table(std::string& o, const TraceGroup& g, const Palette& pal) {
  const RunMetrics& b = baseline(g).metrics;
  put(o, "<div class=\"scroll\"><table><tr><th>policy</th><th>done</th><th>makespan s</th><th>/{0}</th>"
         "<th>mean JCT s</th>"
         "<th>p95 JCT s</th><th>mean queue s</th><th>exec total s</th><th>attempts</th><th>OOM</th><th>failed</th>"
         "<th>collocated</th><th>max slowdown</th><th>energy MJ</th><th>/{0}</th><th>GPU mem util</th>"
         "<th>SM util</th></tr>",
      html_escape(b.policy));
  for (const ReportRun* r : g.runs) {
    const RunMetrics& m = r->metrics;
    put(o, R"(<tr><td><span class="sw" style="background:{}"></span>{}</td><td>{}/{}</td>)", pal.of(m.policy),
        html_escape(m.policy), m.completed, m.jobs);
    put(o, "<td>{:.0f}</td><td>{}</td><td>{:.0f}</td><td>{:.0f}</td><td>{:.0f}</td><td>{:.0f}</td>", m.makespan_s,
        ratio(m.makespan_s, b.makespan_s), m.jct_mean_s, m.jct_p95_s, m.queue_mean_s, m.exec_total_s);
    put(o, "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.1f}</td><td>{}</td>", m.attempts,
        m.oom_attempts, m.failed_attempts, m.collocated_attempts, m.slowdown_max, m.energy_j / 1e6,
        ratio(m.energy_j, b.energy_j));
    put(o, "<td>{:.1f} %</td><td>{:.1f} %</td></tr>", 100 * m.gpu_mem_util_mean, 100 * m.sm_util_mean);
  }
  o += "</table></div>";
}

void legend(std::string& o, const TraceGroup& g, const Palette& pal) {
  o += R"(<div class="legend">)";
  for (const ReportRun* r : g.runs)
    put(o, R"(<span><span class="sw" style="background:{}"></span>{}</span>)", pal.of(r->result->policy),
        html_escape(r->result->policy));
  o += "</div>";
}

void timelines(std::string& o, const TraceGroup& g, std::size_t bar_cap) {
  for (std::size_t k = 0; k < g.runs.size(); ++k) {
    const RunMetrics& m = g.runs[k]->metrics;
    put(o, "<details{}><summary>{}: {} attempts, {} OOM, {} collocated</summary>", k == 0 ? " open" : "",
        html_escape(m.policy), m.attempts, m.oom_attempts, m.collocated_attempts);
    timeline_chart(o, g, *g.runs[k]->result, bar_cap);
    o += "</details>";
  }
}

void trace_section(std::string& o, std::size_t index, const TraceGroup& g, const Palette& pal, std::size_t bar_cap) {
  const SimResult& r = *g.runs.front()->result;
  std::vector<int> servers = r.gpu_server;
  std::sort(servers.begin(), servers.end());
  servers.erase(std::unique(servers.begin(), servers.end()), servers.end());
  put(o, R"(<section id="trace-{}"><h2>Trace {}</h2>)"
         "<p>{} jobs on {} GPUs ({} server{}); first arrival to last end: {}.</p>",
      index, html_escape(g.name), r.jobs.size(), r.gpu_total_mib.size(), servers.size(), servers.size() == 1 ? "" : "s",
      duration(g.span()));
  legend(o, g, pal);
  o += "<h3>Makespan, mean JCT and energy</h3>";
  bars_chart(o, g, pal);
  o += "<h3>Figures</h3>";
  metrics_table(o, g, pal);
  o += "<h3>Job completion time distribution</h3>";
  cdf_chart(o, g, pal);
  o += "<h3>Jobs waiting</h3>";
  queue_chart(o, g, pal);
  o += "<h3>Per-GPU timeline</h3>";
  timelines(o, g, bar_cap);
  o += "<h3>GPU memory in use</h3>";
  memory_section(o, g, pal);
  o += "</section>";
}

std::string render(const std::string& title, const std::vector<ReportRun>& runs, const Json& config,
                   const std::string& spread_section) {
  const auto groups = group_by_trace(runs);
  Palette pal;
  for (const auto& run : runs)
    if (std::find(pal.policies.begin(), pal.policies.end(), run.result->policy) == pal.policies.end())
      pal.policies.push_back(run.result->policy);
  std::string o;
  // The policy forbids every load and every script, so the page cannot reach the network.
  put(o, R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{0}</title><style>{1}</style></head><body>
<h1>{0}</h1><p>{2} run{3}: {4} trace{5} &times; {6} polic{7}.)",
      html_escape(title), kStyle, runs.size(), runs.size() == 1 ? "" : "s", groups.size(), groups.size() == 1 ? "" : "s",
      pal.policies.size(), pal.policies.size() == 1 ? "y" : "ies");
  for (std::size_t i = 0; i < groups.size(); ++i)
    put(o, R"({}<a href="#trace-{}">{}</a>)", i ? ", " : " Traces: ", i, html_escape(groups[i].name));
  o += "</p>\n";
  o += spread_section;  // --seeds N: the spread over seeds, before the first seed's charts
  const std::size_t bar_cap = std::min(kTimelineBars, kReportBars / std::max<std::size_t>(runs.size(), 1));
  for (std::size_t i = 0; i < groups.size(); ++i) trace_section(o, i, groups[i], pal, bar_cap);
  put(o, "<h2>Configuration</h2><details><summary>JSON record of the configuration</summary><pre>{}</pre></details>\n",
      html_escape(config.dump(2, ' ', false, Json::error_handler_t::replace)));
  o += "</body></html>\n";
  return o;
}

}  // namespace

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

void write_html_report(const std::string& path, const std::string& title, const std::vector<ReportRun>& runs,
                       const Json& config, const std::string& spread_section) {
  const std::string html = render(title, runs, config, spread_section);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError(path + ": cannot write file");
  f.write(html.data(), static_cast<std::streamsize>(html.size()));
  f.close();
  if (!f) throw InputError(path + ": cannot write file");
}

}  // namespace aegis
