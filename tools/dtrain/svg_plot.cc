// The loss curve as a standalone SVG: no plotting library, any browser opens it. The loss
// axis is logarithmic, since a training loss falls over orders of magnitude.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli.h"

namespace dtcli {

namespace {
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}
std::string label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 || v < 0.01 ? "%.0e" : "%.3g", v);
  return buf;
}
}  // namespace

void write_loss_svg(const std::string& path, const std::vector<std::pair<int64_t, double>>& points,
                    const std::string& title) {
  constexpr double W = 720, H = 420, L = 70, R = 20, T = 40, B = 50;
  std::vector<std::pair<int64_t, double>> pts;
  for (const auto& p : points)
    if (p.second > 0 && std::isfinite(p.second)) pts.push_back(p);
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << title << "</text>\n";
  if (!pts.empty()) {
    const double x0 = static_cast<double>(pts.front().first), x1 = std::max(x0 + 1, static_cast<double>(pts.back().first));
    double lo = pts[0].second, hi = pts[0].second;
    for (const auto& p : pts) lo = std::min(lo, p.second), hi = std::max(hi, p.second);
    double e0 = std::floor(std::log10(lo)), e1 = std::ceil(std::log10(hi));
    if (e1 <= e0) e1 = e0 + 1;
    auto X = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
    auto Y = [&](double y) { return T + (e1 - std::log10(y)) / (e1 - e0) * (H - T - B); };
    for (double e = e0; e <= e1; ++e) {  // a labelled grid line per decade, light ones at 2 and 5
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (std::log10(v) > e1 + 1e-9) break;
        s << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << num(Y(v)) << "\" y2=\"" << num(Y(v))
          << "\" stroke=\"" << (m == 1.0 ? "#bbb" : "#eee") << "\"/>\n"
          << "<text x=\"" << L - 6 << "\" y=\"" << num(Y(v) + 4) << "\" text-anchor=\"end\">" << label(v) << "</text>\n";
      }
    }
    // Step ticks at a round spacing (1, 2 or 5 times a power of ten), about five of them.
    const double raw = (x1 - x0) / 5.0, mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double tick = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
    for (double x = std::ceil(x0 / tick) * tick; x <= x1 + 1e-9; x += tick)
      s << "<text x=\"" << num(X(x)) << "\" y=\"" << H - B + 18 << "\" text-anchor=\"middle\">"
        << static_cast<int64_t>(std::llround(x)) << "</text>\n";
    // Every step, faint; over it a running mean (exponential, 0.95), which shows the trend.
    s << "<polyline fill=\"none\" stroke=\"#9ec5fe\" stroke-width=\"1\" points=\"";
    for (const auto& p : pts) s << num(X(static_cast<double>(p.first))) << "," << num(Y(p.second)) << " ";
    s << "\"/>\n<polyline fill=\"none\" stroke=\"#0b3d91\" stroke-width=\"2\" points=\"";
    double ema = pts[0].second;
    for (const auto& p : pts) {
      ema = 0.95 * ema + 0.05 * p.second;
      s << num(X(static_cast<double>(p.first))) << "," << num(Y(ema)) << " ";
    }
    s << "\"/>\n";
  }
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">step</text>\n"
    << "<text transform=\"translate(16," << (T + H - B) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << "training loss (log scale)</text>\n</svg>\n";
  write_file(path, s.str());
}

}  // namespace dtcli
