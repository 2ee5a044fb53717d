package dev.waggle.peers;

import java.util.List;
import java.util.Map;

/** One embedded BPMN engine, as the workload runner drives it. Every call is one transaction. */
public interface Engine extends AutoCloseable {
    /** Name and version, e.g. "Flowable 7.2.0". */
    String name();

    /** The settings that matter for the figures (history level, pools), for the report. */
    String settings();

    /** Deploys resources (a BPMN model, and a DMN decision it calls) in one deployment: name to content. */
    void deploy(Map<String, String> resources);

    /** Starts an instance of process {@code processKey}; returns its id. */
    String start(String processKey, String businessKey, Map<String, Object> variables);

    /** Locks up to {@code max} jobs of {@code topic} for this worker (empty when there are none). */
    List<Job> acquire(String topic, int max);

    /** Completes a job this worker locked. */
    void complete(Job job);

    /** Delivers message {@code messageName} to the instance waiting for it. */
    void correlate(String messageName, String processInstanceId);

    @Override
    void close();

    /** An external job: what the worker needs to complete it and to join it to its instance. */
    record Job(String id, String processInstanceId) {}

    /** Told the business key of every process instance whose end was committed. */
    interface EndListener {
        void ended(String businessKey);
    }

    /** Opens an engine on a database. */
    interface Factory {
        /**
         * @param createSchema create or update the engine's tables (else they must exist)
         * @param onEnd told of each instance end once its transaction committed
         */
        Engine open(String jdbcUrl, String user, String password, boolean createSchema, EndListener onEnd);
    }
}
