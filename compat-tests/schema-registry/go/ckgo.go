// confluent-kafka-go's schemaregistry client and its serdes, with records through its
// librdkafka producer and consumer.
package main

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/rest"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/avrov2"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/jsonschema"
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry/serde/protobuf"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/apipb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/sourcecontextpb"
)

const consumeTimeout = 30 * time.Second

func ckClient(e *env) (schemaregistry.Client, error) {
	return schemaregistry.NewClient(schemaregistry.NewConfig(e.registry))
}

func restCode(err error) int {
	var re *rest.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func wantRestCode(err error, code int, what string) error {
	if err == nil {
		return failf("%s: wanted error_code %d, the call succeeded", what, code)
	}
	return check(restCode(err) == code, "%s: wanted error_code %d, got %v", what, code, err)
}

// createTopic makes a one-partition topic through confluent-kafka-go's admin client.
func createTopic(e *env, topic string) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": e.bootstrap})
	if err != nil {
		return err
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}})
	if err != nil {
		return failf("CreateTopics: %v", err)
	}
	if res[0].Error.Code() != kafka.ErrNoError {
		return failf("CreateTopics %s: %v", topic, res[0].Error)
	}
	return nil
}

func produceAll(e *env, topic string, values [][]byte) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": e.bootstrap, "acks": "all", "message.timeout.ms": 60000})
	if err != nil {
		return err
	}
	defer p.Close()
	done := make(chan kafka.Event, len(values))
	for _, v := range values {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: v}, done); err != nil {
			return failf("Produce: %v", err)
		}
	}
	for range values {
		select {
		case ev := <-done:
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				return failf("delivery: %v", m.TopicPartition.Error)
			}
		case <-time.After(60 * time.Second):
			return failf("no delivery report within 60 s")
		}
	}
	return nil
}

func consumeN(e *env, topic string, n int) ([][]byte, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.bootstrap, "group.id": topic,
		"auto.offset.reset": "earliest", "enable.auto.commit": false})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		return nil, err
	}
	var out [][]byte
	deadline := time.Now().Add(consumeTimeout)
	for len(out) < n && time.Now().Before(deadline) {
		m, err := c.ReadMessage(time.Second)
		if err != nil {
			var ke kafka.Error
			if errors.As(err, &ke) && ke.IsTimeout() {
				continue
			}
			return nil, failf("ReadMessage: %v", err)
		}
		out = append(out, m.Value)
	}
	if len(out) < n {
		return nil, failf("consumed %d of %d records within %s", len(out), n, consumeTimeout)
	}
	return out, nil
}

func init() {
	add("go-ckgo/client/register-lookup-get", true, func(e *env) error {
		cl, err := ckClient(e)
		if err != nil {
			return err
		}
		s := e.subject("ck-basic")
		id, err := cl.Register(s, schemaregistry.SchemaInfo{Schema: avroA}, false)
		if err != nil {
			return failf("Register: %v", err)
		}
		id2, err := cl.Register(s, schemaregistry.SchemaInfo{Schema: avroABDef}, false)
		if err != nil || id2 == id {
			return failf("Register v2: %d %v", id2, err)
		}
		cl2, _ := ckClient(e) // no cache: every call below asks the registry
		got, err := cl2.GetID(s, schemaregistry.SchemaInfo{Schema: avroA}, false)
		if err != nil || got != id {
			return failf("GetID: %d %v (registered %d)", got, err, id)
		}
		info, err := cl2.GetBySubjectAndID(s, id)
		if err != nil || info.Schema == "" {
			return failf("GetBySubjectAndID: %+v %v", info, err)
		}
		meta, err := cl2.GetLatestSchemaMetadata(s)
		if err != nil || meta.Version != 2 || meta.ID != id2 {
			return failf("GetLatestSchemaMetadata: %+v %v", meta, err)
		}
		m1, err := cl2.GetSchemaMetadata(s, 1)
		if err != nil || m1.ID != id {
			return failf("GetSchemaMetadata(1): %+v %v", m1, err)
		}
		vs, err := cl2.GetAllVersions(s)
		if err != nil || !slices.Equal(vs, []int{1, 2}) {
			return failf("GetAllVersions: %v %v", vs, err)
		}
		v, err := cl2.GetVersion(s, schemaregistry.SchemaInfo{Schema: avroABDef}, false)
		if err != nil || v != 2 {
			return failf("GetVersion: %d %v", v, err)
		}
		subs, err := cl2.GetAllSubjects()
		if err != nil || !slices.Contains(subs, s) {
			return failf("GetAllSubjects: %v", err)
		}
		svs, err := cl2.GetSubjectsAndVersionsByID(id2)
		if err != nil || !slices.Contains(svs, schemaregistry.SubjectAndVersion{Subject: s, Version: 2}) {
			return failf("GetSubjectsAndVersionsByID: %v %v", svs, err)
		}
		_, err = cl2.GetSchemaMetadata(s, 5)
		return wantRestCode(err, 40402, "an unknown version")
	})

	add("go-ckgo/client/compatibility-and-deletes", true, func(e *env) error {
		cl, err := ckClient(e)
		if err != nil {
			return err
		}
		s := e.subject("ck-compat")
		if _, err := cl.UpdateCompatibility(s, schemaregistry.Forward); err != nil {
			return failf("UpdateCompatibility: %v", err)
		}
		level, err := cl.GetCompatibility(s)
		if err != nil || level != schemaregistry.Forward {
			return failf("GetCompatibility: %v %v", level, err)
		}
		if _, err := cl.Register(s, schemaregistry.SchemaInfo{Schema: avroABDef}, false); err != nil {
			return failf("Register: %v", err)
		}
		// FORWARD: the old schema must read new data; dropping a field with a default is fine,
		// changing its type is not.
		ok, err := cl.TestCompatibility(s, 1, schemaregistry.SchemaInfo{Schema: avroA})
		if err != nil || !ok {
			return failf("TestCompatibility(drop field with default): %v %v", ok, err)
		}
		ok, err = cl.TestSubjectCompatibility(s, schemaregistry.SchemaInfo{Schema: avroAStr})
		if err != nil || ok {
			return failf("TestSubjectCompatibility(int to string): %v %v", ok, err)
		}
		_, err = cl.Register(s, schemaregistry.SchemaInfo{Schema: avroAStr}, false)
		if err := wantRestCode(err, 409, "registering an incompatible schema"); err != nil {
			return err
		}
		if _, err := cl.Register(s, schemaregistry.SchemaInfo{Schema: avroA}, false); err != nil {
			return failf("Register v2: %v", err)
		}
		if n, err := cl.DeleteSubjectVersion(s, 1, false); err != nil || n != 1 {
			return failf("DeleteSubjectVersion soft: %d %v", n, err)
		}
		meta, err := cl.GetSchemaMetadataIncludeDeleted(s, 1, true)
		if err != nil || meta.Version != 1 {
			return failf("a soft-deleted version with deleted=true: %+v %v", meta, err)
		}
		vs, err := cl.DeleteSubject(s, false)
		if err != nil || !slices.Equal(vs, []int{2}) {
			return failf("DeleteSubject soft: %v %v", vs, err)
		}
		vs, err = cl.DeleteSubject(s, true)
		if err != nil || len(vs) != 2 {
			return failf("DeleteSubject permanent: %v %v", vs, err)
		}
		cl2, _ := ckClient(e)
		_, err = cl2.GetAllVersions(s)
		return wantRestCode(err, 40401, "versions of a deleted subject")
	})

	add("go-ckgo/client/references", true, func(e *env) error {
		cl, err := ckClient(e)
		if err != nil {
			return err
		}
		inner, outer := e.subject("ck-ref-inner"), e.subject("ck-ref-outer")
		if _, err := cl.Register(inner, schemaregistry.SchemaInfo{Schema: `{"type":"record","name":"Address","namespace":"es.compat","fields":[{"name":"street","type":"string"}]}`}, false); err != nil {
			return failf("Register inner: %v", err)
		}
		id, err := cl.Register(outer, schemaregistry.SchemaInfo{
			Schema:     `{"type":"record","name":"Person","namespace":"es.compat","fields":[{"name":"home","type":"es.compat.Address"}]}`,
			References: []schemaregistry.Reference{{Name: "es.compat.Address", Subject: inner, Version: 1}},
		}, false)
		if err != nil {
			return failf("Register with a reference: %v", err)
		}
		cl2, _ := ckClient(e)
		info, err := cl2.GetBySubjectAndID(outer, id)
		return check(err == nil && len(info.References) == 1 && info.References[0].Subject == inner,
			"references read back: %+v %v", info.References, err)
	})

	add("go-ckgo/serde/avrov2-round-trip", true, func(e *env) error {
		cl, err := ckClient(e)
		if err != nil {
			return err
		}
		topic := e.subject("ck-avro")
		if err := createTopic(e, topic); err != nil {
			return err
		}
		ser, err := avrov2.NewSerializer(cl, serde.ValueSerde, avrov2.NewSerializerConfig())
		if err != nil {
			return err
		}
		want := []user{{"dee", 1}, {"eve", 2}, {"fay", 3}}
		var raw [][]byte
		for i := range want {
			b, err := ser.Serialize(topic, &want[i])
			if err != nil {
				return failf("Serialize: %v", err)
			}
			raw = append(raw, b)
		}
		if err := produceAll(e, topic, raw); err != nil {
			return err
		}
		back, err := consumeN(e, topic, len(want))
		if err != nil {
			return err
		}
		cl2, _ := ckClient(e)
		de, err := avrov2.NewDeserializer(cl2, serde.ValueSerde, avrov2.NewDeserializerConfig())
		if err != nil {
			return err
		}
		var got []user
		for _, b := range back {
			var u user
			if err := de.DeserializeInto(topic, b, &u); err != nil {
				return failf("DeserializeInto: %v", err)
			}
			got = append(got, u)
		}
		return check(reflect.DeepEqual(got, want), "decoded %v, produced %v", got, want)
	})

	add("go-ckgo/serde/jsonschema-round-trip", true, func(e *env) error {
		cl, err := ckClient(e)
		if err != nil {
			return err
		}
		topic := e.subject("ck-json")
		if err := createTopic(e, topic); err != nil {
			return err
		}
		ser, err := jsonschema.NewSerializer(cl, serde.ValueSerde, jsonschema.NewSerializerConfig())
		if err != nil {
			return err
		}
		want := []user{{"gil", 4}, {"hal", 5}}
		var raw [][]byte
		for i := range want {
			b, err := ser.Serialize(topic, &want[i])
			if err != nil {
				return failf("Serialize: %v", err)
			}
			raw = append(raw, b)
		}
		if err := produceAll(e, topic, raw); err != nil {
			return err
		}
		back, err := consumeN(e, topic, len(want))
		if err != nil {
			return err
		}
		cl2, _ := ckClient(e)
		de, err := jsonschema.NewDeserializer(cl2, serde.ValueSerde, jsonschema.NewDeserializerConfig())
		if err != nil {
			return err
		}
		var got []user
		for _, b := range back {
			var u user
			if err := de.DeserializeInto(topic, b, &u); err != nil {
				return failf("DeserializeInto: %v", err)
			}
			got = append(got, u)
		}
		return check(reflect.DeepEqual(got, want), "decoded %v, produced %v", got, want)
	})

	// Protobuf with messages whose .proto files the Go protobuf module compiles in: Duration (no
	// imports) and Api (google/protobuf/api.proto imports source_context.proto and type.proto,
	// which the serializer registers as referenced subjects).
	protoRoundTrip := func(name string, want proto.Message) func(*env) error {
		return func(e *env) error {
			cl, err := ckClient(e)
			if err != nil {
				return err
			}
			topic := e.subject("ck-proto-" + name)
			if err := createTopic(e, topic); err != nil {
				return err
			}
			ser, err := protobuf.NewSerializer(cl, serde.ValueSerde, protobuf.NewSerializerConfig())
			if err != nil {
				return err
			}
			b, err := ser.Serialize(topic, want)
			if err != nil {
				return failf("Serialize: %v", err)
			}
			if err := produceAll(e, topic, [][]byte{b}); err != nil {
				return err
			}
			back, err := consumeN(e, topic, 1)
			if err != nil {
				return err
			}
			cl2, _ := ckClient(e)
			de, err := protobuf.NewDeserializer(cl2, serde.ValueSerde, protobuf.NewDeserializerConfig())
			if err != nil {
				return err
			}
			if err := de.ProtoRegistry.RegisterMessage(want.ProtoReflect().Type()); err != nil {
				return err
			}
			got, err := de.Deserialize(topic, back[0])
			if err != nil {
				return failf("Deserialize: %v", err)
			}
			gm, ok := got.(proto.Message)
			if !ok || !proto.Equal(gm, want) {
				return failf("decoded %v, produced %v", got, want)
			}
			return nil
		}
	}
	add("go-ckgo/serde/protobuf-round-trip", true, protoRoundTrip("duration", durationpb.New(90*time.Second)))
	add("go-ckgo/serde/protobuf-imports-as-references", true, protoRoundTrip("api",
		&apipb.Api{Name: "es.compat.Svc", Version: "v1", SourceContext: &sourcecontextpb.SourceContext{FileName: "svc.proto"}}))
}
