package dev.waggle.peers;

import java.util.List;
import java.util.Map;

import org.flowable.common.engine.api.delegate.event.FlowableEngineEventType;
import org.flowable.common.engine.api.delegate.event.FlowableEntityEvent;
import org.flowable.common.engine.api.delegate.event.FlowableEvent;
import org.flowable.common.engine.api.delegate.event.FlowableEventListener;
import org.flowable.common.engine.impl.cfg.TransactionState;
import org.flowable.common.engine.impl.persistence.StrongUuidGenerator;
import org.flowable.dmn.engine.configurator.DmnEngineConfigurator;
import org.flowable.engine.ProcessEngine;
import org.flowable.engine.ProcessEngineConfiguration;
import org.flowable.engine.impl.cfg.ProcessEngineConfigurationImpl;
import org.flowable.engine.runtime.Execution;
import org.flowable.engine.runtime.ProcessInstance;
import org.flowable.job.api.AcquiredExternalWorkerJob;

/**
 * Flowable 7.2 embedded: its defaults (history level, async executor, connection pool), with UUIDs
 * for ids and the async executor switched on (it runs timers and the continuation after an external worker job)
 * and a listener told of each process instance end once its transaction committed.
 */
public final class FlowableEngine implements Engine {
    private static final String WORKER = "waggle-peers";
    private final ProcessEngine engine;
    private final ProcessEngineConfigurationImpl config;

    FlowableEngine(String jdbcUrl, String user, String password, boolean createSchema, EndListener onEnd) {
        config = (ProcessEngineConfigurationImpl) ProcessEngineConfiguration.createStandaloneProcessEngineConfiguration()
                .setJdbcUrl(jdbcUrl)
                .setJdbcUsername(user)
                .setJdbcPassword(password)
                .setJdbcDriver("org.postgresql.Driver")
                .setDatabaseSchemaUpdate(createSchema ? ProcessEngineConfiguration.DB_SCHEMA_UPDATE_TRUE : ProcessEngineConfiguration.DB_SCHEMA_UPDATE_FALSE)
                .setAsyncExecutorActivate(!createSchema);
        // as for Camunda 7: UUIDs, not blocks of ids taken from the database under a lock
        config.setIdGenerator(new StrongUuidGenerator());
        config.setTypedEventListeners(new java.util.HashMap<>(Map.of(FlowableEngineEventType.PROCESS_COMPLETED.name(), new java.util.ArrayList<>(List.of(new EndOnCommit(onEnd))))));
        // business rule tasks (`flowable:type="dmn"`) run on Flowable's DMN engine, configured into this one
        config.addConfigurator(new DmnEngineConfigurator());
        engine = config.buildProcessEngine();
    }

    public static void main(String[] args) {
        Runner.main(args, FlowableEngine::new);
    }

    @Override
    public String name() {
        return "Flowable " + ProcessEngine.class.getPackage().getImplementationVersion();
    }

    @Override
    public String settings() {
        return "history level " + config.getHistoryLevel().getKey() + ", async executor on, ids StrongUuidGenerator, JDBC pool max "
                + config.getJdbcMaxActiveConnections();
    }

    @Override
    public void deploy(Map<String, String> resources) {
        org.flowable.engine.repository.DeploymentBuilder deployment = engine.getRepositoryService().createDeployment();
        resources.forEach(deployment::addString);
        deployment.deploy();
    }

    @Override
    public String start(String processKey, String businessKey, Map<String, Object> variables) {
        return engine.getRuntimeService().startProcessInstanceByKey(processKey, businessKey, variables).getId();
    }

    /**
     * Up to {@code max} jobs of the topic, else one. Acquiring an exclusive job (Flowable's default)
     * also locks its process instance, so a batch holding two exclusive jobs of one instance (a
     * parallel multi-instance's) fails whole: Flowable tries it five times on the optimistic
     * locking failure, then returns no jobs and no error. One job at a time still gets such an
     * instance's jobs, one after another.
     */
    @Override
    public List<Job> acquire(String topic, int max) {
        List<AcquiredExternalWorkerJob> jobs = acquireAndLock(topic, max);
        if (jobs.isEmpty() && max > 1) {
            jobs = acquireAndLock(topic, 1);
        }
        return jobs.stream().map(j -> new Job(j.getId(), j.getProcessInstanceId())).toList();
    }

    private List<AcquiredExternalWorkerJob> acquireAndLock(String topic, int max) {
        return engine.getManagementService().createExternalWorkerJobAcquireBuilder()
                .topic(topic, java.time.Duration.ofMinutes(10))
                .acquireAndLock(max, WORKER);
    }

    @Override
    public void complete(Job job) {
        engine.getManagementService().createExternalWorkerCompletionBuilder(job.id(), WORKER).complete();
    }

    @Override
    public void correlate(String messageName, String processInstanceId) {
        Execution waiting = engine.getRuntimeService().createExecutionQuery()
                .processInstanceId(processInstanceId)
                .messageEventSubscriptionName(messageName)
                .singleResult();
        if (waiting == null) {
            throw new IllegalStateException("no execution of " + processInstanceId + " waits for " + messageName);
        }
        engine.getRuntimeService().messageEventReceived(messageName, waiting.getId());
    }

    @Override
    public void close() {
        engine.close();
    }

    /** PROCESS_COMPLETED, delivered after the transaction that completed the instance committed. */
    private record EndOnCommit(EndListener onEnd) implements FlowableEventListener {
        @Override
        public void onEvent(FlowableEvent event) {
            if (event instanceof FlowableEntityEvent e && e.getEntity() instanceof ProcessInstance pi) {
                onEnd.ended(pi.getBusinessKey());
            }
        }

        @Override
        public boolean isFailOnException() {
            return false;
        }

        @Override
        public boolean isFireOnTransactionLifecycleEvent() {
            return true;
        }

        @Override
        public String getOnTransaction() {
            return TransactionState.COMMITTED.name();
        }
    }
}
