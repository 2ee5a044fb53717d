package dev.waggle.peers;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One measured run of one workload shape on one embedded engine: deploy, warm up, measure, drain,
 * then print the figures as JSON in the shape of the bench's report (crates/bench/src/report.rs).
 *
 * <p>Starters create instances at a fixed rate (open loop: a pacer hands each due creation to
 * the starter threads) or keep a number of instances in flight (closed loop). One acquirer
 * thread locks the model's external jobs and hands each to the completer threads, which complete
 * it after the worker delay. An instance's end is seen by the engine's own listener when the
 * transaction that ended it has committed. Execution time runs from the creation's due moment
 * (open loop) or the creation call (closed loop) to that commit.
 */
public final class Runner {
    private final Map<String, String> opts;
    private final Engine.Factory factory;

    /** Counters and per-instance records of the run. */
    private final Map<String, Inst> byKey = new ConcurrentHashMap<>();
    private final Map<String, Inst> byPid = new ConcurrentHashMap<>();
    private final AtomicLong created = new AtomicLong();
    private final AtomicLong finished = new AtomicLong();
    private final AtomicLong errors = new AtomicLong();
    private final List<String> firstErrors = Collections.synchronizedList(new ArrayList<>());
    private final List<long[]> jobSamples = Collections.synchronizedList(new ArrayList<>());
    private volatile Semaphore inFlight;
    /** Set once the run is over: what fails while the threads are stopped is no error of the engine. */
    private volatile boolean stopping;

    /** One process instance of the run. Times are System.nanoTime(). */
    private static final class Inst {
        final long seq;
        /** When its creation was due (open loop) or sent (closed loop). */
        volatile long sent;
        volatile boolean begun;
        volatile long answered;
        volatile long published;
        /** What last made a job of this instance: creation, publish, or the previous completion. */
        volatile long lastTrigger;
        volatile long firstJobAfterPublish;
        volatile long ended;

        Inst(long seq, long sent) {
            this.seq = seq;
            this.sent = sent;
            this.lastTrigger = sent;
        }
    }

    private Runner(Map<String, String> opts, Engine.Factory factory) {
        this.opts = opts;
        this.factory = factory;
    }

    /** Entry point of each engine's main class. */
    public static void main(String[] args, Engine.Factory factory) {
        Map<String, String> opts = parse(args);
        try {
            int code = new Runner(opts, factory).run();
            System.exit(code);
        } catch (Exception e) {
            System.err.println("error: " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + a);
            }
            String key = a.substring(2);
            if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                opts.put(key, args[++i]);
            } else {
                opts.put(key, "true");
            }
        }
        return opts;
    }

    private String opt(String key, String dflt) {
        String v = opts.getOrDefault(key, dflt);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    private double num(String key, double dflt) {
        return Double.parseDouble(opt(key, Double.toString(dflt)));
    }

    private int run() throws Exception {
        String url = opt("jdbc-url", null);
        String user = opt("jdbc-user", "postgres");
        String password = opt("jdbc-password", "");
        if (opts.containsKey("schema-only")) {
            try (Engine e = factory.open(url, user, password, true, k -> {})) {
                System.err.println(e.name() + ": schema ready");
            }
            return 0;
        }
        String model = Files.readString(Path.of(opt("model", null)));
        Map<String, Object> variables = Json.topLevel(Files.readString(Path.of(opt("payload", null))));
        String rate = opt("rate", "max");
        int outstanding = (int) num("outstanding", 1024);
        long delayMs = (long) num("worker-delay-ms", 0);
        String topic = opt("job-type", "benchmark-task");
        String message = opts.get("publish-message");
        double timerMs = num("timer-ms", -1);
        Duration warmup = Duration.ofMillis((long) (num("warmup-s", 5) * 1000));
        Duration window = Duration.ofMillis((long) (num("duration-s", 30) * 1000));
        Duration drain = Duration.ofMillis((long) (num("drain-s", 10) * 1000));
        int starterThreads = (int) num("starters", 4);
        int completerThreads = (int) num("completers", 4);
        long pollIdleMs = (long) num("poll-idle-ms", 10);

        Engine engine = factory.open(url, user, password, false, this::ended);
        Instant jvmStart = ProcessHandle.current().info().startInstant().orElse(Instant.now());
        double startupS = Duration.between(jvmStart, Instant.now()).toMillis() / 1000.0;
        Thread.sleep(2000);
        double idleRss = Proc.statusMb("VmRSS");
        Map<String, String> resources = new java.util.LinkedHashMap<>();
        resources.put(Path.of(opt("model", null)).getFileName().toString(), model);
        String decision = opts.get("decision");
        if (decision != null) {
            resources.put(Path.of(decision).getFileName().toString(), Files.readString(Path.of(decision)));
        }
        engine.deploy(resources);
        String processKey = processId(model);
        if (!rate.equals("max")) {
            inFlight = null;
        } else {
            inFlight = new Semaphore(outstanding);
        }

        ExecutorService starters = Executors.newFixedThreadPool(starterThreads, named("starter"));
        ScheduledExecutorService completers = Executors.newScheduledThreadPool(completerThreads, named("completer"));
        AtomicInteger pendingJobs = new AtomicInteger();
        int maxPending = Math.max(32, Math.min(outstanding, 1024));
        boolean hasJobs = model.contains("serviceTask");
        Thread acquirer = new Thread(() -> acquireLoop(engine, topic, delayMs, completers, pendingJobs, maxPending, pollIdleMs), "acquirer");
        acquirer.setDaemon(true);
        if (hasJobs) {
            acquirer.start();
        }

        long begin = System.nanoTime();
        long t0 = begin + warmup.toNanos();
        long t1 = t0 + window.toNanos();
        Thread pacer;
        if (rate.equals("max")) {
            AtomicLong seqs = new AtomicLong();
            pacer = new Thread(() -> {
                for (int i = 0; i < starterThreads; i++) {
                    starters.execute(() -> {
                        while (System.nanoTime() < t1) {
                            try {
                                if (!inFlight.tryAcquire(50, TimeUnit.MILLISECONDS)) {
                                    continue;
                                }
                            } catch (InterruptedException e) {
                                return;
                            }
                            long seq = seqs.getAndIncrement();
                            Inst inst = new Inst(seq, System.nanoTime());
                            byKey.put(Long.toString(seq), inst);
                            startOne(engine, inst, processKey, variables, message);
                        }
                    });
                }
            }, "pacer");
        } else {
            double perSecond = Double.parseDouble(rate);
            pacer = new Thread(() -> {
                for (long i = 0; ; i++) {
                    long due = begin + (long) (i * 1e9 / perSecond);
                    if (due >= t1) {
                        return;
                    }
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        LockSupport.parkNanos(wait);
                    }
                    Inst inst = new Inst(i, due);
                    byKey.put(Long.toString(i), inst);
                    starters.execute(() -> startOne(engine, inst, processKey, variables, message));
                }
            }, "pacer");
        }
        pacer.setDaemon(true);
        pacer.start();

        // the window: counts and memory each second
        LockSupport.parkNanos(t0 - System.nanoTime());
        double load0 = Proc.loadAverage();
        double cpu0 = Proc.cpuSeconds();
        List<long[]> counts = new ArrayList<>();
        counts.add(new long[] {created.get(), finished.get()});
        double maxRss = Proc.statusMb("VmRSS");
        for (long next = t0 + 1_000_000_000L; next + 500_000_000L < t1; next += 1_000_000_000L) {
            LockSupport.parkNanos(next - System.nanoTime());
            counts.add(new long[] {created.get(), finished.get()});
            maxRss = Math.max(maxRss, Proc.statusMb("VmRSS"));
        }
        LockSupport.parkNanos(t1 - System.nanoTime());
        long[] end = {created.get(), finished.get()};
        counts.add(end);
        double cpu1 = Proc.cpuSeconds();
        double load1 = Proc.loadAverage();

        // drain: the measured instances may still be running
        long drainEnd = System.nanoTime() + drain.toNanos();
        while (System.nanoTime() < drainEnd && measured(t0, t1).stream().anyMatch(i -> i.ended == 0)) {
            Thread.sleep(50);
        }
        // the peak since the JVM started, read after the drain: a long instance (W9) peaks there
        double peakRss = Proc.statusMb("VmHWM");
        stopping = true;
        acquirer.interrupt();
        acquirer.join(5000);
        starters.shutdownNow();
        completers.shutdownNow();

        double windowS = (t1 - t0) / 1e9;
        String json = report(engine, t0, t1, windowS, counts, startupS, idleRss, maxRss, peakRss, cpu1 - cpu0, load0, load1, timerMs);
        String out = opts.get("json");
        if (out != null) {
            Files.writeString(Path.of(out), json);
        } else {
            System.out.println(json);
        }
        System.out.flush();
        // no orderly shutdown: the engine's executors would first finish what is still queued
        Runtime.getRuntime().halt(0);
        return 0;
    }

    private static java.util.concurrent.ThreadFactory named(String prefix) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /** The id of the model's executable process. */
    static String processId(String model) {
        Matcher m = Pattern.compile("<(?:bpmn:)?process\\s[^>]*\\bid=\"([^\"]+)\"").matcher(model);
        if (!m.find()) {
            throw new IllegalArgumentException("the model has no process");
        }
        return m.group(1);
    }

    private void startOne(Engine engine, Inst inst, String processKey, Map<String, Object> variables, String message) {
        if (Thread.currentThread().isInterrupted()) {
            return;
        }
        if (inFlight != null) {
            inst.sent = System.nanoTime();
            inst.lastTrigger = inst.sent;
        }
        inst.begun = true;
        try {
            String pid = engine.start(processKey, Long.toString(inst.seq), variables);
            byPid.put(pid, inst);
            inst.answered = System.nanoTime();
            created.incrementAndGet();
            if (message != null) {
                inst.published = System.nanoTime();
                inst.lastTrigger = inst.published;
                engine.correlate(message, pid);
            }
        } catch (RuntimeException e) {
            error("create", e);
            if (inFlight != null && inst.ended == 0) {
                inFlight.release();
            }
        }
    }

    private void acquireLoop(Engine engine, String topic, long delayMs, ScheduledExecutorService completers, AtomicInteger pending,
            int maxPending, long pollIdleMs) {
        while (!Thread.currentThread().isInterrupted()) {
            try {
                int room = maxPending - pending.get();
                if (room <= 0) {
                    Thread.sleep(1);
                    continue;
                }
                List<Engine.Job> jobs = engine.acquire(topic, Math.min(32, room));
                long at = System.nanoTime();
                if (jobs.isEmpty()) {
                    Thread.sleep(pollIdleMs);
                    continue;
                }
                for (Engine.Job job : jobs) {
                    pending.incrementAndGet();
                    Inst inst = byPid.get(job.processInstanceId());
                    long trigger = inst == null ? 0 : inst.lastTrigger;
                    if (inst != null && inst.published != 0 && inst.firstJobAfterPublish == 0) {
                        inst.firstJobAfterPublish = at;
                    }
                    completers.schedule(() -> {
                        try {
                            long sent = System.nanoTime();
                            if (inst != null) {
                                inst.lastTrigger = sent;
                            }
                            completeRetrying(engine, job);
                            long acked = System.nanoTime();
                            jobSamples.add(new long[] {inst == null ? -1 : inst.sent, at - trigger, acked - at, inst == null ? 0 : 1});
                        } catch (RuntimeException e) {
                            error("complete", e);
                        } finally {
                            pending.decrementAndGet();
                        }
                    }, delayMs, TimeUnit.MILLISECONDS);
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                error("acquire", e);
            }
        }
    }

    /**
     * Completes a job, again when the engine refuses it for a concurrent change of the same rows
     * (both engines' optimistic locking: completions of a parallel multi-instance's inner
     * instances all update its body), as their own job executors retry.
     */
    private static void completeRetrying(Engine engine, Engine.Job job) {
        for (int attempt = 1; ; attempt++) {
            try {
                engine.complete(job);
                return;
            } catch (RuntimeException e) {
                if (attempt >= 50 || !e.getClass().getSimpleName().contains("OptimisticLocking")) {
                    throw e;
                }
                LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(1_000_000L, 5_000_000L));
            }
        }
    }

    /** The engine's listener: the instance with this business key has ended (committed). */
    private void ended(String businessKey) {
        Inst inst = businessKey == null ? null : byKey.get(businessKey);
        if (inst == null || inst.ended != 0) {
            return;
        }
        inst.ended = System.nanoTime();
        finished.incrementAndGet();
        if (inFlight != null) {
            inFlight.release();
        }
    }

    private void error(String what, Exception e) {
        if (stopping) {
            return;
        }
        errors.incrementAndGet();
        synchronized (firstErrors) {
            if (firstErrors.size() < 5) {
                firstErrors.add(what + ": " + e);
            }
        }
    }

    /**
     * Instances whose creation was due (open loop) or sent (closed loop) inside the window, whether
     * or not the engine got to them: at a fixed rate the bench's client sends every creation when
     * it is due, and an engine that falls behind leaves the rest unfinished, not unmeasured.
     */
    private List<Inst> measured(long t0, long t1) {
        List<Inst> out = new ArrayList<>();
        for (Inst i : byKey.values()) {
            if (i.sent >= t0 && i.sent < t1) {
                out.add(i);
            }
        }
        return out;
    }

    private String report(Engine engine, long t0, long t1, double windowS, List<long[]> counts, double startupS, double idleRss,
            double maxRss, double peakRss, double cpuS, double load0, double load1, double timerMs) {
        List<Inst> measured = measured(t0, t1);
        List<Double> execution = new ArrayList<>();
        List<Double> correlation = new ArrayList<>();
        int unfinished = 0;
        int seconds = counts.size() - 1;
        List<List<Double>> bySecond = new ArrayList<>();
        for (int s = 0; s < seconds; s++) {
            bySecond.add(new ArrayList<>());
        }
        for (Inst i : measured) {
            if (i.ended == 0) {
                unfinished++;
                continue;
            }
            double ms = (i.ended - i.sent) / 1e6;
            execution.add(ms);
            int s = (int) ((i.sent - t0) / 1_000_000_000L);
            if (s < seconds) {
                bySecond.get(s).add(ms);
            }
            if (i.published != 0 && i.firstJobAfterPublish != 0) {
                correlation.add((i.firstJobAfterPublish - i.published) / 1e6);
            }
        }
        // due in the window but never even begun (the starters were all busy): counted unfinished too
        long skipped = measured.stream().filter(i -> !i.begun).count();
        List<Double> lifetime = new ArrayList<>();
        List<Double> activation = new ArrayList<>();
        synchronized (jobSamples) {
            for (long[] j : jobSamples) {
                if (j[3] == 1 && j[0] >= t0 && j[0] < t1) {
                    activation.add(j[1] / 1e6);
                    lifetime.add(j[2] / 1e6);
                }
            }
        }
        long[] c0 = counts.get(0);
        long[] c1 = counts.get(counts.size() - 1);
        StringBuilder b = new StringBuilder("{");
        field(b, "engine", Json.quote(engine.name()));
        field(b, "settings", Json.quote(engine.settings()));
        field(b, "window_s", fmt(windowS));
        field(b, "created_per_s", fmt((c1[0] - c0[0]) / windowS));
        field(b, "completed_per_s", fmt((c1[1] - c0[1]) / windowS));
        field(b, "errors", Long.toString(errors.get()));
        field(b, "skipped", Long.toString(skipped));
        field(b, "backlog_start", Long.toString(c0[0] - c0[1]));
        field(b, "backlog_end", Long.toString(c1[0] - c1[1]));
        field(b, "measured_instances", Integer.toString(measured.size()));
        field(b, "unfinished_instances", Integer.toString(unfinished));
        field(b, "execution", Stats.summary(execution));
        field(b, "job_lifetime", Stats.summary(lifetime));
        field(b, "activation", Stats.summary(activation));
        field(b, "correlation", Stats.summary(correlation));
        List<Double> lateness = new ArrayList<>();
        if (timerMs >= 0) {
            execution.forEach(e -> lateness.add(e - timerMs));
        }
        field(b, "timer_lateness", timerMs >= 0 ? Stats.summary(lateness) : "null");
        field(b, "load_average", "[" + fmt(load0) + "," + fmt(load1) + "]");
        synchronized (firstErrors) {
            field(b, "first_errors", "[" + String.join(",", firstErrors.stream().map(Json::quote).toList()) + "]");
        }
        field(b, "server", String.format(Locale.ROOT,
                "{\"pid\":%d,\"startup_s\":%s,\"idle_rss_mb\":%s,\"window_max_rss_mb\":%s,\"peak_rss_mb\":%s,\"cpu_s\":%s,\"cpu_cores\":%s}",
                ProcessHandle.current().pid(), fmt(startupS), fmt(idleRss), fmt(maxRss), fmt(peakRss), fmt(cpuS), fmt(cpuS / windowS)));
        StringBuilder series = new StringBuilder("[");
        for (int s = 0; s < seconds; s++) {
            long[] a = counts.get(s);
            long[] z = counts.get(s + 1);
            List<Double> lat = bySecond.get(s);
            String p50 = "null";
            String p99 = "null";
            if (!lat.isEmpty()) {
                double[] sorted = lat.stream().mapToDouble(Double::doubleValue).sorted().toArray();
                p50 = fmt(Stats.percentile(sorted, 50));
                p99 = fmt(Stats.percentile(sorted, 99));
            }
            if (s > 0) {
                series.append(',');
            }
            series.append(String.format(Locale.ROOT,
                    "{\"second\":%d,\"created\":%d,\"completed\":%d,\"rejected\":0,\"execution_p50_ms\":%s,\"execution_p99_ms\":%s}",
                    s + 1, z[0] - a[0], z[1] - a[1], p50, p99));
        }
        series.append(']');
        b.append("\"series\":").append(series).append('}');
        return b.toString();
    }

    private static void field(StringBuilder b, String name, String json) {
        b.append('"').append(name).append("\":").append(json).append(',');
    }

    private static String fmt(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "null" : String.format(Locale.ROOT, "%.3f", v);
    }
}
