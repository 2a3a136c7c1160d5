// A share-group member (KIP-932) written with the Apache Kafka Java client
// (KafkaShareConsumer), driven over stdin / stdout by tests/peers/share_peer.py.
//
// Usage: java -cp '<classes>:<kafka libs>/*' SharePeer BOOTSTRAP GROUP MODE [key=value ...]
//
// MODE is share.acknowledgement.mode: "implicit" (the next poll or commit
// accepts what the previous poll returned) or "explicit" (every record gets
// the acknowledgement type currently set with the "ack" command).
//
// Events, on stdout, one per line: "<System.nanoTime()> <event> <fields...>":
//   ready java-share <pid>
//   ok <command...>                     a command was taken
//   rec <topic> <partition> <offset> <delivery count> <key> <ack>
//                                       a record handed out by poll; <key> is its
//                                       UTF-8 text ("-" when null), <ack> what the
//                                       peer acknowledged it with (implicit: accept)
//   consumed <n>                        the budget of "consume" is used up; the
//                                       peer committed and stopped polling
//   committed <partitions> <failed>     answer to "commit" (commitSync): how many
//                                       partitions were answered, how many failed
//   acked <offsets> <exception|->       the acknowledgement commit callback
//   drained <count> <bytes> <first ns> <last ns>
//                                       answer to "drain"
//   closed                              after close; the process then exits 0
//   error <type> <message>              something threw; the process exits 3
// Commands, on stdin, one per line:
//   subscribe <topic>    subscribe; the peer then polls (100 ms at a time)
//   ack accept|release|reject
//                        explicit mode: the type given to every later record
//   consume <n>          stop polling (after a commitSync) once n more records
//                        were handed out; -1: no limit (the default); 0: stop now
//   commit               commitSync
//   drain <n> <seconds>  benchmark: poll without reporting records until n were
//                        handed out (or the time is up), then commitSync; records
//                        are counted, their value lengths summed
//   close                close(30 s) and exit 0
//   crash                exit at once with status 1 (Runtime.halt), leaving nothing
// End of input acts as close.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;

public final class SharePeer {
    private static final String EOF = "\u0000eof";

    private final PrintStream out;
    private final KafkaShareConsumer<byte[], byte[]> consumer;
    private final boolean explicit;
    private final LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
    private AcknowledgeType ackType = AcknowledgeType.ACCEPT;
    // Records still to hand out before stopping; negative: no limit.
    private long budget = -1;
    private long handedSinceConsume = 0;
    private boolean polling = false;

    private SharePeer(PrintStream out, Properties props, boolean explicit) {
        this.out = out;
        this.explicit = explicit;
        this.consumer = new KafkaShareConsumer<>(props);
        // Called on the thread that polls / commits / closes: emit needs no lock.
        this.consumer.setAcknowledgementCommitCallback((offsets, exception) -> {
            long count = 0;
            for (Set<Long> acked : offsets.values()) {
                count += acked.size();
            }
            emit("acked " + count + " "
                    + (exception == null ? "-" : exception.getClass().getSimpleName()));
        });
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        if (args.length < 3 || !(args[2].equals("implicit") || args[2].equals("explicit"))) {
            System.err.println("usage: SharePeer BOOTSTRAP GROUP implicit|explicit [key=value ...]");
            Runtime.getRuntime().halt(2);
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("share.acknowledgement.mode", args[2]);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        for (int i = 3; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        SharePeer peer = new SharePeer(out, props, args[2].equals("explicit"));
        try {
            peer.run();
        } catch (Throwable t) {
            peer.emit("error " + t.getClass().getSimpleName() + " " + oneLine(t.getMessage()));
            t.printStackTrace();
            out.flush();
            Runtime.getRuntime().halt(3);
        }
    }

    private static String oneLine(String s) {
        return s == null ? "-" : s.replace('\n', ' ').replace('\r', ' ');
    }

    private void emit(String line) {
        out.print(System.nanoTime() + " " + line + "\n");
        out.flush();
    }

    private void startReader() {
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    commands.add(line.trim());
                }
            } catch (Exception e) {
                // treated as end of input
            }
            commands.add(EOF);
        }, "stdin-reader");
        reader.setDaemon(true);
        reader.start();
    }

    private void run() throws InterruptedException {
        startReader();
        emit("ready java-share " + ProcessHandle.current().pid());
        while (true) {
            // While not polling, wait for commands; the consumer's background
            // thread keeps heartbeating, so the member stays in the group.
            String command = polling ? commands.poll() : commands.poll(100, TimeUnit.MILLISECONDS);
            if (command != null && !command.isEmpty() && !handle(command)) {
                return;
            }
            if (polling) {
                pollOnce();
            }
        }
    }

    /** Runs one command; false when the program should end. */
    private boolean handle(String command) {
        String[] words = command.split(" ");
        switch (words[0]) {
            case "subscribe":
                consumer.subscribe(List.of(words[1]));
                polling = budget != 0;
                emit("ok subscribe");
                return true;
            case "ack":
                if (!explicit) {
                    emit("error BadCommand ack needs share.acknowledgement.mode=explicit");
                    return true;
                }
                ackType = AcknowledgeType.valueOf(words[1].toUpperCase());
                emit("ok ack " + words[1]);
                return true;
            case "consume":
                budget = Long.parseLong(words[1]);
                handedSinceConsume = 0;
                polling = budget != 0 && !consumer.subscription().isEmpty();
                emit("ok consume " + budget);
                return true;
            case "commit":
                commit();
                return true;
            case "drain":
                drain(Long.parseLong(words[1]), Double.parseDouble(words[2]));
                return true;
            case "crash":
                out.flush();
                Runtime.getRuntime().halt(1);
                return false;
            case "close":
            case EOF:
                consumer.close(Duration.ofSeconds(30));
                emit("closed");
                return false;
            default:
                emit("error BadCommand " + command);
                return true;
        }
    }

    private void commit() {
        Map<TopicIdPartition, Optional<KafkaException>> results = consumer.commitSync();
        long failed = results.values().stream().filter(Optional::isPresent).count();
        emit("committed " + results.size() + " " + failed);
    }

    private void pollOnce() {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
        if (records.isEmpty()) {
            return;
        }
        String ack = explicit ? ackType.toString().toLowerCase() : "accept";
        for (ConsumerRecord<byte[], byte[]> record : records) {
            if (explicit) {
                consumer.acknowledge(record, ackType);
            }
            byte[] key = record.key();
            String keyText = key == null ? "-" : new String(key, StandardCharsets.UTF_8);
            emit("rec " + record.topic() + " " + record.partition() + " " + record.offset() + " "
                    + record.deliveryCount().map(String::valueOf).orElse("-") + " " + keyText
                    + " " + ack);
            handedSinceConsume++;
            if (budget > 0) {
                budget--;
            }
        }
        if (budget == 0) {
            // Every record of the batch is reported and acknowledged (share
            // records cannot be handed back unseen): settle them before pausing.
            polling = false;
            commit();
            emit("consumed " + handedSinceConsume);
        }
    }

    private void drain(long want, double seconds) {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        long count = 0;
        long bytes = 0;
        long first = 0;
        long last = 0;
        while (count < want && System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(500));
            for (ConsumerRecord<byte[], byte[]> record : records) {
                if (count == 0) {
                    first = System.nanoTime();
                }
                count++;
                byte[] value = record.value();
                bytes += value == null ? 0 : value.length;
                if (explicit) {
                    consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                }
            }
            if (!records.isEmpty()) {
                last = System.nanoTime();
            }
        }
        consumer.commitSync();
        emit("drained " + count + " " + bytes + " " + first + " " + last);
    }
}
