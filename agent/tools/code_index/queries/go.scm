; Outline patterns for Go. Captures: @definition.<kind> spans the definition, @name is its
; name, @parent names the type a method belongs to (its receiver's).

(function_declaration name: (identifier) @name) @definition.function

(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @parent
        (generic_type type: (type_identifier) @parent)
        (pointer_type [(type_identifier) @parent (generic_type type: (type_identifier) @parent)])
      ]))
  name: (field_identifier) @name) @definition.method

(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct

(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface

; Other named types (`type ID int`) and aliases (`type ID = string`).
(type_spec name: (type_identifier) @name) @definition.type

(type_alias name: (type_identifier) @name) @definition.type

(interface_type (method_elem name: (field_identifier) @name) @definition.method)

(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))
