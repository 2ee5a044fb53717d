package dev.waggle.peers;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** This process's CPU time and memory, from /proc (as the bench reads a server's). */
final class Proc {
    private Proc() {}

    /** Clock ticks per second of /proc/self/stat's times (Linux's USER_HZ on every platform it runs). */
    private static final double TICKS = 100.0;

    /** User plus system CPU time so far, in seconds. */
    static double cpuSeconds() {
        try {
            String stat = Files.readString(Path.of("/proc/self/stat"));
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / TICKS;
        } catch (IOException | RuntimeException e) {
            return Double.NaN;
        }
    }

    /** A field of /proc/self/status in MB (VmRSS: resident now, VmHWM: peak resident). */
    static double statusMb(String key) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith(key + ":")) {
                    String kb = line.substring(key.length() + 1).trim().replace("kB", "").trim();
                    return Long.parseLong(kb) / 1024.0;
                }
            }
        } catch (IOException | RuntimeException e) {
            // reported as missing
        }
        return Double.NaN;
    }

    /** The machine's 1-minute load average. */
    static double loadAverage() {
        try {
            return Double.parseDouble(Files.readString(Path.of("/proc/loadavg")).split(" ")[0]);
        } catch (IOException | RuntimeException e) {
            return Double.NaN;
        }
    }
}
