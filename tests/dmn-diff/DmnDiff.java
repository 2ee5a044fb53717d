// Differential harness: evaluates the DMN corpus with dmn-scala 1.9.0 (on feel-scala 1.17.8), the
// DMN engine Zeebe 8.5.8 embeds, and prints one JSON line per case with what Zeebe's
// EvaluateDecision response carries, taken from dmn-scala the way Zeebe 8.5.8's zeebe-dmn
// module takes it (io.camunda.zeebe.dmn.impl.DmnScalaDecisionEngine, EvaluatedDmnScalaDecision,
// EvaluatedDmnScalaInput/Output, MatchedDmnScalaRule in github.com/camunda/camunda, zeebe/dmn;
// that module is Java 21 bytecode and CI has a JDK 17, so its few lines of glue are re-done here):
// - a parse failure is dmn-scala's failure message (or an exception's message);
// - an evaluation failure reads "Expected to evaluate decision '<id>', but <dmn-scala's
//   message>", and the failed decision is the last one in the audit log (else the one asked for);
// - evaluated decisions are the audit log's entries: type by the decision logic's class, an
//   input's name its label, else its expression's text cut to 30 characters, an output's name
//   its label, else its name, a rule's index its position in the table from 1;
// - values are the JSON of the MessagePack Zeebe writes from a FEEL value (its
//   FeelToMessagePackTransformer, as tests/diff-common/DiffJson.java's `zeebe` prints it).
//
// Run by regenerate.sh (compiled, with IdentityMapper registered as a service).
//
// cases.jsonl: one case a line, {"id": .., "dmn": "<file in corpus/>", "decision": "<id>",
// "vars": {..}}; without "decision" the case only parses the file.
// Output per case: the case's fields, then "parsed" (and "parse_error"), and for an evaluation
// "ok", "output" (the decision's output), "failure" and "failed_decision" (on failure) and
// "evaluated": the evaluated decisions in order, each {id, name, type, output, inputs: [{id,
// name, value}], rules: [{id, index, outputs: [{id, name, value}]}]}.
import java.io.*;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.time.*;
import java.util.*;
import org.camunda.dmn.Audit;
import org.camunda.dmn.DmnEngine;
import org.camunda.dmn.parser.*;
import org.camunda.feel.syntaxtree.*;
import scala.jdk.javaapi.CollectionConverters;

public class DmnDiff {

  /**
   * Zeebe's value mapper (io.camunda.zeebe.feel.impl.MessagePackValueMapper, which zeebe-dmn
   * registers as a service) hands a decision's result back as the FEEL value itself; this one
   * does the same (regenerate.sh registers it). Variables are plain Java values here, which it
   * leaves to feel-scala's default mapper as Zeebe's does.
   */
  public static final class IdentityMapper implements org.camunda.feel.valuemapper.CustomValueMapper {
    public void org$camunda$feel$valuemapper$CustomValueMapper$_setter_$priority_$eq(int p) {}

    public scala.Option<Val> toVal(Object x, scala.Function1<Object, Val> inner) {
      return scala.Option.empty();
    }

    public scala.Option<Object> unpackVal(Val v, scala.Function1<Val, Object> inner) {
      return scala.Option.apply(v);
    }

    public int priority() {
      return 20;
    }
  }

  public static void main(String[] args) throws Exception {
    Path cases = Paths.get(args[0]);
    Path dir = Paths.get(args[1]);
    DmnEngine engine = new DmnEngine.Builder().build();
    Map<String, Object> parsed = new HashMap<>(); // ParsedDmn or the failure message
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
    for (String line : Files.readAllLines(cases, StandardCharsets.UTF_8)) {
      if (line.isBlank()) continue;
      @SuppressWarnings("unchecked")
      Map<String, Object> c = (Map<String, Object>) DiffJson.parse(line);
      String file = (String) c.get("dmn");
      Object dmn = parsed.get(file);
      if (dmn == null) {
        try (InputStream in = Files.newInputStream(dir.resolve(file))) {
          scala.util.Either<DmnEngine.Failure, ParsedDmn> r = engine.parse(in);
          dmn = r.isLeft() ? r.left().get().message() : r.toOption().get();
        } catch (Throwable t) {
          dmn = String.valueOf(t.getMessage());
        }
        parsed.put(file, dmn);
      }
      StringBuilder sb = new StringBuilder();
      sb.append("{\"id\":").append(DiffJson.quote((String) c.get("id")));
      sb.append(",\"dmn\":").append(DiffJson.quote(file));
      String decision = (String) c.get("decision");
      if (decision != null) sb.append(",\"decision\":").append(DiffJson.quote(decision));
      if (c.containsKey("vars")) sb.append(",\"vars\":").append(DiffJson.Json.write(c.get("vars")));
      boolean valid = dmn instanceof ParsedDmn;
      sb.append(",\"parsed\":").append(valid);
      if (!valid) sb.append(",\"parse_error\":").append(DiffJson.quote((String) dmn));
      if (valid && decision != null) {
        @SuppressWarnings("unchecked")
        Map<String, Object> vars = c.containsKey("vars") ? (Map<String, Object>) c.get("vars") : new HashMap<>();
        evaluate(engine, (ParsedDmn) dmn, decision, vars, sb);
      }
      sb.append("}");
      out.println(sb);
    }
  }

  static void evaluate(DmnEngine engine, ParsedDmn dmn, String decision, Map<String, Object> vars, StringBuilder sb) {
    scala.util.Either<DmnEngine.EvalFailure, DmnEngine.EvalResult> r = engine.eval(dmn, decision, vars);
    Audit.AuditLog log = r.isLeft() ? r.left().get().auditLog() : r.toOption().get().auditLog();
    List<Audit.AuditLogEntry> entries = CollectionConverters.asJava(log.entries());
    sb.append(",\"ok\":").append(r.isRight());
    if (r.isLeft()) {
      String reason = r.left().get().failure().message();
      String failed = entries.isEmpty() ? decision : entries.get(entries.size() - 1).id();
      sb.append(",\"failure\":").append(DiffJson.quote(String.format("Expected to evaluate decision '%s', but %s", decision, reason)));
      sb.append(",\"failed_decision\":").append(DiffJson.quote(failed));
    } else {
      DmnEngine.EvalResult ok = r.toOption().get();
      sb.append(",\"output\":").append(ok.isNil() ? "null" : DiffJson.zeebe(ok.value()));
    }
    sb.append(",\"evaluated\":[");
    boolean first = true;
    for (Audit.AuditLogEntry e : entries) {
      if (!first) sb.append(",");
      first = false;
      sb.append("{\"id\":").append(DiffJson.quote(e.id()));
      sb.append(",\"name\":").append(DiffJson.quote(e.name()));
      sb.append(",\"type\":").append(DiffJson.quote(type(e.decisionLogic())));
      sb.append(",\"output\":").append(DiffJson.zeebe(e.result().result()));
      sb.append(",\"inputs\":[");
      StringBuilder rules = new StringBuilder();
      if (e.result() instanceof Audit.DecisionTableEvaluationResult) {
        Audit.DecisionTableEvaluationResult t = (Audit.DecisionTableEvaluationResult) e.result();
        boolean f2 = true;
        for (Audit.EvaluatedInput i : CollectionConverters.asJava(t.inputs())) {
          if (!f2) sb.append(",");
          f2 = false;
          ParsedInput in = i.input();
          String name = in.name();
          if (name == null && in.expression() instanceof FeelExpression) {
            name = String.format("%.30s", ((FeelExpression) in.expression()).expression().text());
          }
          sb.append("{\"id\":").append(DiffJson.quote(in.id()));
          sb.append(",\"name\":").append(DiffJson.quote(name));
          sb.append(",\"value\":").append(DiffJson.zeebe(i.value())).append("}");
        }
        List<ParsedRule> all = CollectionConverters.asJava(((ParsedDecisionTable) e.decisionLogic()).rules().toList());
        f2 = true;
        for (Audit.EvaluatedRule m : CollectionConverters.asJava(t.matchedRules())) {
          if (!f2) rules.append(",");
          f2 = false;
          rules.append("{\"id\":").append(DiffJson.quote(m.rule().id()));
          rules.append(",\"index\":").append(all.indexOf(m.rule()) + 1);
          rules.append(",\"outputs\":[");
          boolean f3 = true;
          for (Audit.EvaluatedOutput o : CollectionConverters.asJava(m.outputs())) {
            if (!f3) rules.append(",");
            f3 = false;
            ParsedOutput po = o.output();
            rules.append("{\"id\":").append(DiffJson.quote(po.id()));
            rules.append(",\"name\":").append(DiffJson.quote(po.label() != null ? po.label() : po.name()));
            rules.append(",\"value\":").append(DiffJson.zeebe(o.value())).append("}");
          }
          rules.append("]}");
        }
      }
      sb.append("],\"rules\":[").append(rules).append("]}");
    }
    sb.append("]");
  }

  /** Zeebe's DecisionType of a decision's logic. */
  static String type(ParsedDecisionLogic logic) {
    if (logic instanceof ParsedDecisionTable) return "DECISION_TABLE";
    if (logic instanceof ParsedLiteralExpression) return "LITERAL_EXPRESSION";
    if (logic instanceof ParsedContext) return "CONTEXT";
    if (logic instanceof ParsedList) return "LIST";
    if (logic instanceof ParsedRelation) return "RELATION";
    if (logic instanceof ParsedInvocation) return "INVOCATION";
    return "UNKNOWN";
  }
}
