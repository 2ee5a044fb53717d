package dev.waggle.peers;

import java.util.Arrays;
import java.util.List;

/** Percentiles by nearest rank, as the bench computes them (crates/bench/src/stats.rs). */
final class Stats {
    private Stats() {}

    /** {"count":..,"mean_ms":..,"p50_ms":..,"p90_ms":..,"p99_ms":..,"max_ms":..}, or null without samples. */
    static String summary(List<Double> samplesMs) {
        if (samplesMs.isEmpty()) {
            return "null";
        }
        double[] s = samplesMs.stream().mapToDouble(Double::doubleValue).toArray();
        Arrays.sort(s);
        double mean = Arrays.stream(s).sum() / s.length;
        return String.format(java.util.Locale.ROOT,
                "{\"count\":%d,\"mean_ms\":%.3f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f}",
                s.length, mean, percentile(s, 50), percentile(s, 90), percentile(s, 99), s[s.length - 1]);
    }

    /** The smallest sample such that at least p % of the samples are less than or equal to it. */
    static double percentile(double[] sorted, double p) {
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(1, Math.min(rank, sorted.length)) - 1];
    }
}
