package dev.waggle.peers;

import java.util.List;
import java.util.Map;

import org.camunda.bpm.engine.ProcessEngine;
import org.camunda.bpm.engine.ProcessEngineConfiguration;
import org.camunda.bpm.engine.delegate.ExecutionListener;
import org.camunda.bpm.engine.externaltask.LockedExternalTask;
import org.camunda.bpm.engine.impl.bpmn.parser.AbstractBpmnParseListener;
import org.camunda.bpm.engine.impl.bpmn.parser.BpmnParseListener;
import org.camunda.bpm.engine.impl.cfg.ProcessEngineConfigurationImpl;
import org.camunda.bpm.engine.impl.cfg.TransactionState;
import org.camunda.bpm.engine.impl.context.Context;
import org.camunda.bpm.engine.impl.persistence.StrongUuidGenerator;
import org.camunda.bpm.engine.impl.persistence.entity.ProcessDefinitionEntity;
import org.camunda.bpm.engine.impl.util.xml.Element;
import org.camunda.bpm.engine.variable.Variables;

/**
 * Camunda 7.24 Community Edition embedded: its defaults (history level, job executor,
 * connection pool), with the job executor switched on (it runs timers), UUIDs for ids, and a process end
 * listener, added to every deployed process, that reports the end once its transaction committed.
 */
public final class Camunda7Engine implements Engine {
    private static final String WORKER = "waggle-peers";
    private final ProcessEngine engine;
    private final ProcessEngineConfigurationImpl config;

    Camunda7Engine(String jdbcUrl, String user, String password, boolean createSchema, EndListener onEnd) {
        config = (ProcessEngineConfigurationImpl) ProcessEngineConfiguration.createStandaloneProcessEngineConfiguration()
                .setJdbcUrl(jdbcUrl)
                .setJdbcUsername(user)
                .setJdbcPassword(password)
                .setJdbcDriver("org.postgresql.Driver")
                .setDatabaseSchemaUpdate(createSchema ? ProcessEngineConfiguration.DB_SCHEMA_UPDATE_TRUE : ProcessEngineConfiguration.DB_SCHEMA_UPDATE_FALSE)
                .setJobExecutorActivate(!createSchema);
        // the default DbIdGenerator takes a block of ids on a second pooled connection while holding
        // its lock: with the pool taken by threads waiting for that lock, the engine deadlocks
        // (seen here at 25 instances in flight); UUIDs are Camunda's advice for concurrent use
        config.setIdGenerator(new StrongUuidGenerator());
        ExecutionListener endOnCommit = execution -> {
            String businessKey = execution.getProcessBusinessKey();
            Context.getCommandContext().getTransactionContext().addTransactionListener(TransactionState.COMMITTED, ctx -> onEnd.ended(businessKey));
        };
        BpmnParseListener addEndListener = new AbstractBpmnParseListener() {
            @Override
            public void parseProcess(Element processElement, ProcessDefinitionEntity processDefinition) {
                processDefinition.addListener(ExecutionListener.EVENTNAME_END, endOnCommit);
            }
        };
        config.setCustomPostBPMNParseListeners(new java.util.ArrayList<>(List.of(addEndListener)));
        engine = config.buildProcessEngine();
    }

    public static void main(String[] args) {
        Runner.main(args, Camunda7Engine::new);
    }

    @Override
    public String name() {
        return "Camunda " + ProcessEngine.class.getPackage().getImplementationVersion() + " CE";
    }

    @Override
    public String settings() {
        return "history level " + config.getHistoryLevel().getName() + ", job executor on, ids StrongUuidGenerator, JDBC pool max "
                + (config.getJdbcMaxActiveConnections() > 0 ? config.getJdbcMaxActiveConnections() : 10) + " (MyBatis's default)";
    }

    @Override
    public void deploy(Map<String, String> resources) {
        org.camunda.bpm.engine.repository.DeploymentBuilder deployment = engine.getRepositoryService().createDeployment();
        resources.forEach(deployment::addString);
        deployment.deploy();
    }

    @Override
    public String start(String processKey, String businessKey, Map<String, Object> variables) {
        return engine.getRuntimeService().startProcessInstanceByKey(processKey, businessKey, storable(variables)).getId();
    }

    /** Camunda 7 keeps a string variable in a 4,000-character column and refuses a longer one. */
    static final int LONGEST_STRING = 4000;

    /**
     * The variables with each string longer than {@link #LONGEST_STRING} as its UTF-8 bytes, which
     * Camunda 7 keeps in its byte array table (as Flowable does with a long string by itself).
     */
    static Map<String, Object> storable(Map<String, Object> variables) {
        Map<String, Object> out = new java.util.LinkedHashMap<>(variables);
        out.replaceAll((name, value) -> value instanceof String s && s.length() > LONGEST_STRING
                ? Variables.byteArrayValue(s.getBytes(java.nio.charset.StandardCharsets.UTF_8))
                : value);
        return out;
    }

    @Override
    public List<Job> acquire(String topic, int max) {
        List<LockedExternalTask> tasks = engine.getExternalTaskService().fetchAndLock(max, WORKER).topic(topic, 600_000L).execute();
        return tasks.stream().map(t -> new Job(t.getId(), t.getProcessInstanceId())).toList();
    }

    @Override
    public void complete(Job job) {
        engine.getExternalTaskService().complete(job.id(), WORKER);
    }

    @Override
    public void correlate(String messageName, String processInstanceId) {
        engine.getRuntimeService().createMessageCorrelation(messageName).processInstanceId(processInstanceId).correlate();
    }

    @Override
    public void close() {
        engine.close();
    }
}
