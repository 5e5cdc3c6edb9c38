// One pattern over a CSV of readings on Flink SQL MATCH_RECOGNIZE (local mini cluster, streaming mode,
// event time), for scripts/cep_rivals.py.
//
//   java <add-opens> -cp <pyflink/lib jars>:<classes> FlinkBench EVENTS.csv PATTERN WITHIN_MS PARALLELISM MATCHES_OUT
//
// EVENTS.csv: lines `sensor,ts_ms,value`, ts ascending, no header. PATTERN: ab | neg | akc | ab_any
// (ab written as the brief's `A Z*? B` with Z undefined, to check that it gives the same matches).
// Writes `sensor,a_ts,last_ts` per match to MATCHES_OUT and prints `RESULT {json}`: `seconds` runs
// from submitting the query to the last result row read (job start-up, CSV reading and matching);
// `net_seconds` is Flink's own net runtime of the job.

import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;
import org.apache.flink.table.api.TableResult;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

public class FlinkBench {
    static String interval(long ms) {  // Flink SQL has no millisecond interval literal; 'N' SECOND allows at most 99
        long s = ms / 1000;
        return String.format(Locale.ROOT, "INTERVAL '%d %02d:%02d:%02d.%03d' DAY TO SECOND(3)",
                s / 86400, s / 3600 % 24, s / 60 % 60, s % 60, ms % 1000);
    }

    static String query(String pattern, long withinMs) {
        String w = " WITHIN " + interval(withinMs);
        String head = "SELECT sensor, a_ts, last_ts FROM ev MATCH_RECOGNIZE (PARTITION BY sensor ORDER BY rowtime "
                + "MEASURES A.ts AS a_ts, %s AS last_ts ONE ROW PER MATCH AFTER MATCH SKIP TO NEXT ROW ";
        switch (pattern) {
            case "ab":
                // Z: any row that is not a qualifying b, B: a qualifying b. Z and B exclude each other,
                // so A Z* B has one way to match per A: B is the earliest qualifying row after A.
                return String.format(head, "B.ts") + "PATTERN (A Z* B)" + w + " DEFINE A AS A.`value` > 9, "
                        + "Z AS Z.`value` <= A.`value` + 0.95, B AS B.`value` > A.`value` + 0.95)";
            case "ab_any":
                // The reluctant form with Z undefined (any row): checked to give the same matches as ab.
                return String.format(head, "B.ts") + "PATTERN (A Z*? B)" + w + " DEFINE A AS A.`value` > 9, "
                        + "B AS B.`value` > A.`value` + 0.95)";
            case "neg":
                // As ab, and Z may not be an n (value > 9.9): an n before the first b kills the match
                // (neither Z nor B takes it). A b is itself an n (> 9.95), which is the b ending the match.
                return String.format(head, "B.ts") + "PATTERN (A Z* B)" + w + " DEFINE A AS A.`value` > 9, "
                        + "Z AS Z.`value` <= A.`value` + 0.95 AND Z.`value` <= 9.9, B AS B.`value` > A.`value` + 0.95)";
            case "akc":
                // No alternation or groups in Flink's MATCH_RECOGNIZE, so b+ with skipped rows is spelt:
                // X* skips rows before the first b (X: not b), B is the first b, W* takes every later row
                // that is not a c (the later b's and the skipped rows), C the first c after the first b.
                // X/B and W/C exclude each other: one way to match per A.
                return String.format(head, "C.ts") + "PATTERN (A X* B W* C)" + w + " DEFINE A AS A.`value` > 9, "
                        + "X AS X.`value` >= 5, B AS B.`value` < 5, W AS W.`value` <= A.`value` + 0.95, "
                        + "C AS C.`value` > A.`value` + 0.95)";
            default:
                throw new IllegalArgumentException("unknown pattern " + pattern);
        }
    }

    public static void main(String[] args) throws Exception {
        Path csv = Path.of(args[0]).toAbsolutePath();
        String pattern = args[1];
        long withinMs = Long.parseLong(args[2]);
        int parallelism = Integer.parseInt(args[3]);
        Path out = Path.of(args[4]);

        long t0 = System.nanoTime();
        // A long window holds many partial matches: GC pauses in the one JVM can outlast the mini
        // cluster's default 50 s heartbeat, which would fail the job; the run is local, so wait.
        Configuration cluster = Configuration.fromMap(Map.of("heartbeat.timeout", "3600000",
                "pekko.ask.timeout", "3600 s"));
        TableEnvironment env = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(cluster).build());
        env.getConfig().set("parallelism.default", String.valueOf(parallelism));
        env.getConfig().set("table.exec.resource.default-parallelism", String.valueOf(parallelism));
        env.getConfig().set("table.local-time-zone", "UTC");
        env.getConfig().set("pipeline.name", "cep_rivals_" + pattern);
        // The input is in time order; the watermark lags 1 s so that no row is ever late, whatever
        // the interleaving of the source's splits. A bounded source ends with the final watermark.
        env.executeSql("CREATE TABLE ev (sensor STRING, ts BIGINT, `value` DOUBLE, "
                + "rowtime AS TO_TIMESTAMP_LTZ(ts, 3), WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND) "
                + "WITH ('connector' = 'filesystem', 'path' = 'file://" + csv + "', 'format' = 'csv')");
        String sql = query(pattern, withinMs);
        long t1 = System.nanoTime();
        TableResult result = env.executeSql(sql);
        List<String> matches = new ArrayList<>();
        try (CloseableIterator<Row> rows = result.collect()) {
            while (rows.hasNext()) {
                Row r = rows.next();
                matches.add(r.getField(0) + "," + r.getField(1) + "," + r.getField(2));
            }
        }
        long t2 = System.nanoTime();
        double net = -1;
        try {
            net = result.getJobClient().get().getJobExecutionResult().get().getNetRuntime() / 1000.0;
        } catch (Exception ignored) {  // the net runtime is a bonus; the wall time above is what is compared
        }
        Shared.writeLines(out, matches);
        System.out.println(String.format(Locale.ROOT,
                "RESULT {\"matches\": %d, \"seconds\": %.6f, \"net_seconds\": %.6f, \"setup_seconds\": %.6f, "
                        + "\"peak_rss_kib\": %d, \"parallelism\": %d, \"sql\": \"%s\"}",
                matches.size(), (t2 - t1) / 1e9, net, (t1 - t0) / 1e9, Shared.peakKiB(), parallelism,
                Shared.quoted(sql)));
        System.exit(0);  // the mini cluster's threads would keep the JVM up a while
    }
}
