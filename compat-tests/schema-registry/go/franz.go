// franz-go's pkg/sr: the client's API and its Serde, with records through kgo.
package main

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

const franzTimeout = 60 * time.Second

func franzClient(e *env) (*sr.Client, error) { return sr.NewClient(sr.URLs(e.registry)) }

// srCode is the registry's error_code of err (0 if err is not a registry error).
func srCode(err error) int {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return 0
}

func wantCode(err error, code int, what string) error {
	if err == nil {
		return failf("%s: wanted error_code %d, the call succeeded", what, code)
	}
	return check(srCode(err) == code, "%s: wanted error_code %d, got %v", what, code, err)
}

func init() {
	add("go-franz/client/register-lookup-get", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		s := e.subject("franz-basic")
		types, err := cl.SupportedTypes(ctx)
		if err != nil {
			return failf("SupportedTypes: %v", err)
		}
		if err := check(slices.Contains(types, sr.TypeAvro), "types %v", types); err != nil {
			return err
		}
		ss, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: avroA})
		if err != nil {
			return failf("CreateSchema: %v", err)
		}
		if err := check(ss.Subject == s && ss.Version == 1 && ss.ID > 0, "CreateSchema gave %+v", ss); err != nil {
			return err
		}
		again, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: avroA})
		if err != nil || again.ID != ss.ID || again.Version != 1 {
			return failf("registering again: %+v %v", again, err)
		}
		v2, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: avroABDef})
		if err != nil || v2.Version != 2 {
			return failf("second version: %+v %v", v2, err)
		}
		look, err := cl.LookupSchema(ctx, s, sr.Schema{Schema: avroA})
		if err != nil || look.ID != ss.ID || look.Version != 1 {
			return failf("LookupSchema: %+v %v", look, err)
		}
		byID, err := cl.SchemaByID(ctx, ss.ID)
		if err != nil || byID.Type != sr.TypeAvro {
			return failf("SchemaByID: %+v %v", byID, err)
		}
		vs, err := cl.SubjectVersions(ctx, s)
		if err != nil || !slices.Equal(vs, []int{1, 2}) {
			return failf("SubjectVersions: %v %v", vs, err)
		}
		latest, err := cl.SchemaByVersion(ctx, s, -1)
		if err != nil || latest.Version != 2 || latest.ID != v2.ID {
			return failf("SchemaByVersion(-1): %+v %v", latest, err)
		}
		subs, err := cl.SubjectsByID(ctx, ss.ID)
		if err != nil || !slices.Contains(subs, s) {
			return failf("SubjectsByID: %v %v", subs, err)
		}
		all, err := cl.Subjects(ctx)
		if err != nil || !slices.Contains(all, s) {
			return failf("Subjects: %v", err)
		}
		_, err = cl.SchemaByVersion(ctx, s, 9)
		if err := wantCode(err, 40402, "an unknown version"); err != nil {
			return err
		}
		_, err = cl.SubjectVersions(ctx, e.subject("franz-nosuch"))
		if err := wantCode(err, 40401, "an unknown subject"); err != nil {
			return err
		}
		_, err = cl.LookupSchema(ctx, s, sr.Schema{Schema: avroAStr})
		return wantCode(err, 40403, "lookup of an unknown schema")
	})

	add("go-franz/client/compatibility", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		s := e.subject("franz-compat")
		res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, s)
		if res[0].Err != nil || res[0].Level != sr.CompatBackward {
			return failf("SetCompatibility: %+v", res[0])
		}
		got := cl.Compatibility(ctx, s)
		if got[0].Err != nil || got[0].Level != sr.CompatBackward {
			return failf("Compatibility: %+v", got[0])
		}
		if _, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: avroA}); err != nil {
			return failf("CreateSchema: %v", err)
		}
		ok, err := cl.CheckCompatibility(ctx, s, -1, sr.Schema{Schema: avroABDef})
		if err != nil || !ok.Is {
			return failf("CheckCompatibility(add field with default): %+v %v", ok, err)
		}
		bad, err := cl.CheckCompatibility(ctx, s, -1, sr.Schema{Schema: avroAStr})
		if err != nil || bad.Is {
			return failf("CheckCompatibility(int to string): %+v %v", bad, err)
		}
		_, err = cl.CreateSchema(ctx, s, sr.Schema{Schema: avroAStr})
		if err := wantCode(err, 409, "registering an incompatible schema"); err != nil {
			return err
		}
		res = cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, s)
		if res[0].Err != nil {
			return failf("SetCompatibility NONE: %v", res[0].Err)
		}
		if _, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: avroAStr}); err != nil {
			return failf("registering under NONE: %v", err)
		}
		reset := cl.ResetCompatibility(ctx, s)
		if reset[0].Err != nil {
			return failf("ResetCompatibility: %v", reset[0].Err)
		}
		global := cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), s)
		return check(global[0].Err == nil && global[0].Level != 0, "defaultToGlobal after reset: %+v", global[0])
	})

	add("go-franz/client/mode", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		s := e.subject("franz-mode")
		if _, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: avroA}); err != nil {
			return failf("CreateSchema: %v", err)
		}
		if r := cl.SetMode(ctx, sr.ModeReadOnly, s); r[0].Err != nil || r[0].Mode != sr.ModeReadOnly {
			return failf("SetMode READONLY: %+v", r[0])
		}
		if r := cl.Mode(ctx, s); r[0].Err != nil || r[0].Mode != sr.ModeReadOnly {
			return failf("Mode: %+v", r[0])
		}
		_, err = cl.CreateSchema(ctx, s, sr.Schema{Schema: avroABDef})
		if err := wantCode(err, 42205, "registering in a READONLY subject"); err != nil {
			return err
		}
		if r := cl.SetMode(ctx, sr.ModeReadWrite, s); r[0].Err != nil {
			return failf("SetMode READWRITE: %v", r[0].Err)
		}
		_, err = cl.CreateSchema(ctx, s, sr.Schema{Schema: avroABDef})
		return err
	})

	add("go-franz/client/import-mode-explicit-id", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		s := e.subject("franz-import")
		if r := cl.SetMode(ctx, sr.ModeImport, s); r[0].Err != nil {
			return failf("SetMode IMPORT on an empty subject: %v", r[0].Err)
		}
		id := 900_000 + int(time.Now().UnixNano()%90_000)
		got, err := cl.RegisterSchema(ctx, s, sr.Schema{Schema: avroA}, id, 3)
		if err != nil || got != id {
			return failf("RegisterSchema with id %d: %d %v", id, got, err)
		}
		if r := cl.SetMode(ctx, sr.ModeReadWrite, s); r[0].Err != nil {
			return failf("SetMode READWRITE: %v", r[0].Err)
		}
		ss, err := cl.SchemaByVersion(ctx, s, 3)
		return check(err == nil && ss.ID == id, "version 3 after import: %+v %v", ss, err)
	})

	add("go-franz/client/delete-soft-and-hard", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		s := e.subject("franz-del")
		for _, sch := range []string{avroA, avroABDef} {
			if _, err := cl.CreateSchema(ctx, s, sr.Schema{Schema: sch}); err != nil {
				return failf("CreateSchema: %v", err)
			}
		}
		if err := cl.DeleteSchema(ctx, s, 1, sr.SoftDelete); err != nil {
			return failf("DeleteSchema soft: %v", err)
		}
		vs, err := cl.SubjectVersions(ctx, s)
		if err != nil || !slices.Equal(vs, []int{2}) {
			return failf("versions after a soft delete: %v %v", vs, err)
		}
		vs, err = cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), s)
		if err != nil || !slices.Equal(vs, []int{1, 2}) {
			return failf("versions with deleted: %v %v", vs, err)
		}
		_, err = cl.DeleteSubject(ctx, s, sr.HardDelete)
		if err := wantCode(err, 40405, "hard delete before soft"); err != nil {
			return err
		}
		deleted, err := cl.DeleteSubject(ctx, s, sr.SoftDelete)
		if err != nil || !slices.Equal(deleted, []int{2}) {
			return failf("DeleteSubject soft: %v %v", deleted, err)
		}
		deleted, err = cl.DeleteSubject(ctx, s, sr.HardDelete)
		if err != nil || !slices.Equal(deleted, []int{1, 2}) {
			return failf("DeleteSubject hard: %v %v", deleted, err)
		}
		subs, err := cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted))
		return check(err == nil && !slices.Contains(subs, s), "a hard-deleted subject is listed: %v", err)
	})

	add("go-franz/client/json-schema", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		ss, err := cl.CreateSchema(ctx, e.subject("franz-json"), sr.Schema{Schema: jsonUser, Type: sr.TypeJSON})
		if err != nil {
			return failf("CreateSchema JSON: %v", err)
		}
		back, err := cl.SchemaByID(ctx, ss.ID)
		return check(err == nil && back.Type == sr.TypeJSON, "SchemaByID: %+v %v", back, err)
	})

	add("go-franz/client/protobuf", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		ss, err := cl.CreateSchema(ctx, e.subject("franz-proto"), sr.Schema{Schema: protoRec, Type: sr.TypeProtobuf})
		if err != nil {
			return failf("CreateSchema PROTOBUF: %v", err)
		}
		back, err := cl.SchemaByID(ctx, ss.ID)
		return check(err == nil && back.Type == sr.TypeProtobuf, "SchemaByID: %+v %v", back, err)
	})

	add("go-franz/serde/avro-round-trip", true, func(e *env) error {
		ctx, cancel := context.WithTimeout(context.Background(), franzTimeout)
		defer cancel()
		cl, err := franzClient(e)
		if err != nil {
			return err
		}
		topic := e.subject("franz-avro")
		if err := createTopic(e, topic); err != nil {
			return err
		}
		ss, err := cl.CreateSchema(ctx, topic+"-value", sr.Schema{Schema: userV1})
		if err != nil {
			return failf("CreateSchema: %v", err)
		}
		avroSchema, err := avro.Parse(userV1)
		if err != nil {
			return err
		}
		var serde sr.Serde
		serde.Register(ss.ID, user{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(avroSchema, v) }),
			sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(avroSchema, b, v) }))
		kc, err := kgo.NewClient(kgo.SeedBrokers(e.bootstrap), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return err
		}
		defer kc.Close()
		want := []user{{"ann", 31}, {"bob", 42}, {"cy", 7}}
		for _, u := range want {
			b, err := serde.Encode(u)
			if err != nil {
				return failf("Encode: %v", err)
			}
			if err := kc.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: b}).FirstErr(); err != nil {
				return failf("ProduceSync: %v", err)
			}
		}
		var got []user
		for len(got) < len(want) {
			fetches := kc.PollFetches(ctx)
			if ctx.Err() != nil {
				return failf("consumed %d of %d records: %v", len(got), len(want), ctx.Err())
			}
			if errs := fetches.Errors(); len(errs) > 0 {
				return failf("fetch: %v", errs[0].Err)
			}
			for _, r := range fetches.Records() {
				id, _, err := serde.DecodeID(r.Value)
				if err != nil || id != ss.ID {
					return failf("wire id %d (%v), registered %d", id, err, ss.ID)
				}
				var u user
				if err := serde.Decode(r.Value, &u); err != nil {
					return failf("Decode: %v", err)
				}
				got = append(got, u)
			}
		}
		return check(reflect.DeepEqual(got, want), "decoded %v, produced %v", got, want)
	})
}

const userV1 = `{"type":"record","name":"User","namespace":"es.compat","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`

type user struct {
	Name string `avro:"name" json:"name"`
	Age  int32  `avro:"age" json:"age"`
}
